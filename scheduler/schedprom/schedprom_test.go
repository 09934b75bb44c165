package schedprom_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
	"github.com/holdfast-go/holdfast/scheduler/schedprom"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestObserverCountsRunsAcrossReplicas(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb := b.New(t)
			prefix := redistest.Prefix(t, rdb)
			start := time.Now().UTC().Truncate(time.Second).Add(2 * time.Second)
			var (
				mu   sync.Mutex
				runs = map[time.Time]int{}
				done = make(chan struct{})
			)
			var observers []*schedprom.Observer
			for range 2 {
				obs, err := schedprom.New(schedprom.Options{})
				require.NoError(t, err)
				observers = append(observers, obs)
			}
			var scheds []*scheduler.Scheduler
			for _, obs := range observers {
				leases, err := lease.New(rdb, lease.Options{Prefix: prefix + "lease:"})
				require.NoError(t, err)
				ledger, err := redisledger.New(rdb, redisledger.Options{Prefix: prefix + "ledger:"})
				require.NoError(t, err)
				s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ledger, Observer: obs})
				require.NoError(t, err)
				require.NoError(t, s.Register(scheduler.Job{
					Name: "metered", Spec: "* * * * * *", LeaseTTL: time.Second,
					StartAt: start, EndAt: start.Add(2 * time.Second),
					Run: func(_ context.Context, r scheduler.Run) error {
						mu.Lock()
						defer mu.Unlock()
						runs[r.At]++
						if len(runs) == 2 {
							close(done)
						}
						return nil
					},
				}))
				require.NoError(t, s.Start(context.Background()))
				scheds = append(scheds, s)
			}
			timer := time.NewTimer(15 * time.Second)
			defer timer.Stop()
			select {
			case <-done:
			case <-timer.C:
				t.Fatal("slots did not run")
			}
			for _, s := range scheds {
				require.NoError(t, s.Stop(context.Background()))
			}

			sum := func(get func(o *schedprom.Observer) float64) (total float64) {
				for _, o := range observers {
					total += get(o)
				}
				return total
			}
			// Each replica's Observer registers on its own registry; the
			// replica that ran a slot exports all five families for it.
			series := 0
			for _, o := range observers {
				reg := prometheus.NewRegistry()
				require.NoError(t, reg.Register(o))
				n, err := testutil.GatherAndCount(reg, "holdfast_job_run_started_total", "holdfast_job_run_completed_total",
					"holdfast_job_run_duration_seconds", "holdfast_job_schedule_lag_seconds", "holdfast_job_last_success_timestamp")
				require.NoError(t, err)
				series += n
			}
			require.GreaterOrEqual(t, series, 5)
			require.Equal(t, 2.0, sum(func(o *schedprom.Observer) float64 { return total(t, o, "holdfast_job_run_started_total") }),
				"one start per slot across replicas")
			require.Equal(t, 2.0, sum(func(o *schedprom.Observer) float64 { return total(t, o, "holdfast_job_run_completed_total") }))
			require.Equal(t, 2.0, sum(func(o *schedprom.Observer) float64 { return total(t, o, "holdfast_job_schedule_lag_seconds") }),
				"one lag sample per run")
			require.Equal(t, map[time.Time]int{start: 1, start.Add(time.Second): 1}, runs)
		})
	}
}

// total sums one metric family of o over every series: counter values,
// or histogram sample counts.
func total(t *testing.T, o *schedprom.Observer, name string) float64 {
	t.Helper()
	return series(t, o, name, "").count
}

func TestNewRefusesBucketsThatDoNotIncrease(t *testing.T) {
	t.Parallel()
	_, err := schedprom.New(schedprom.Options{LagBuckets: []float64{2, 1}})
	require.ErrorIs(t, err, schedprom.ErrInvalidOptions)
	require.ErrorIs(t, err, errfamily.ErrInvalidOptions) // the family's member (internal/errfamily)
}
