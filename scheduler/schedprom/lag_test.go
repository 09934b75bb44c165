package schedprom_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
	"github.com/holdfast-go/holdfast/scheduler/schedprom"
)

// job_schedule_lag_seconds observes the first attempts of slots that came
// due on the schedule, not the runs an operator asked for: a backfill of
// three 29 February slots (2016, 2020, 2024) and a trigger run (job_run_started_total counts them)
// leave the histogram of their job empty (it held 4 samples summing to
// 6.56e8 s before); an every-second job's runs are observed, with small
// lags.
func TestScheduleLagLeavesOutOperatorRuns(t *testing.T) {
	t.Parallel()
	rdb := redistest.Real(t)
	prefix := redistest.Prefix(t, rdb)
	obs, err := schedprom.New(schedprom.Options{})
	require.NoError(t, err)
	leases, err := lease.New(rdb, lease.Options{Prefix: prefix + "lease:"})
	require.NoError(t, err)
	ldg, err := redisledger.New(rdb, redisledger.Options{Prefix: prefix + "ledger:"})
	require.NoError(t, err)
	s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ldg, Observer: obs})
	require.NoError(t, err)
	var daily, tick atomic.Int64
	// 29 February only: no slot of its own comes due while the test runs.
	require.NoError(t, s.Register(scheduler.Job{Name: "daily", Spec: "0 3 29 2 *",
		Run: func(context.Context, scheduler.Run) error { daily.Add(1); return nil }}))
	require.NoError(t, s.Register(scheduler.Job{Name: "tick", Spec: "* * * * * *",
		Run: func(context.Context, scheduler.Run) error { tick.Add(1); return nil }}))
	require.NoError(t, s.Start(t.Context()))
	t.Cleanup(func() { _ = s.Stop(context.Background()) })

	ctx := t.Context()
	slots, err := s.Backfill(ctx, "daily", "", time.Date(2016, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), "test")
	require.NoError(t, err)
	require.Len(t, slots, 3)
	_, err = s.Trigger(ctx, "daily", "", "test")
	require.NoError(t, err)
	testwait.Until(t, 15*time.Second, "the backfilled and triggered runs, and two ticks", func() bool {
		return daily.Load() >= 4 && tick.Load() >= 2
	})

	require.Equal(t, 4.0, metric(t, obs, "holdfast_job_run_started_total", "daily").count, "every operator run counted as started")
	lag := metric(t, obs, "holdfast_job_schedule_lag_seconds", "daily")
	require.Zero(t, lag.count, "no lag sample of an operator's run (sum %g s)", lag.sum)
	lag = metric(t, obs, "holdfast_job_schedule_lag_seconds", "tick")
	require.GreaterOrEqual(t, lag.count, 1.0, "scheduled runs are observed")
	require.Less(t, lag.sum/lag.count, 5.0, "their lag is the schedule's: small")
}

type sample struct{ count, sum float64 }

// metric reads the family name's series of job from o: a counter's value
// (count), or a histogram's sample count and sum.
func metric(t *testing.T, o *schedprom.Observer, name, job string) sample {
	t.Helper()
	return series(t, o, name, job)
}

// series sums the family name's series of o with the label job (every
// series when job is "", a name no job has): counter values (count), or
// histogram sample counts and sums.
func series(t *testing.T, o *schedprom.Observer, name, job string) sample {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(o))
	fams, err := reg.Gather()
	require.NoError(t, err)
	var out sample
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			ours := job == ""
			for _, l := range m.GetLabel() {
				ours = ours || (l.GetName() == "job" && l.GetValue() == job)
			}
			switch {
			case !ours:
			case m.GetHistogram() != nil:
				out.count += float64(m.GetHistogram().GetSampleCount())
				out.sum += m.GetHistogram().GetSampleSum()
			default:
				out.count += m.GetCounter().GetValue()
			}
		}
	}
	return out
}
