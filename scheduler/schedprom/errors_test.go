package schedprom_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/ledgertest"
	"github.com/holdfast-go/holdfast/scheduler/schedprom"
)

// errStore stands for a store that is down.
var errStore = errors.New("store down")

// failingLedger is a ledgertest.Memory whose State and Finish fail while
// told to, as a ledger over a Redis or Postgres that went away.
type failingLedger struct {
	*ledgertest.Memory
	mu                  sync.Mutex
	failState, failDone bool
}

func (l *failingLedger) set(state, finish bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failState, l.failDone = state, finish
}

func (l *failingLedger) State(ctx context.Context, job, partition string, since, now time.Time) (ledger.State, error) {
	l.mu.Lock()
	fail := l.failState
	l.mu.Unlock()
	if fail {
		return ledger.State{}, errStore
	}
	return l.Memory.State(ctx, job, partition, since, now)
}

func (l *failingLedger) Finish(ctx context.Context, s ledger.Slot, f ledger.Fence, attempt int, o ledger.Outcome, now time.Time) error {
	l.mu.Lock()
	fail := l.failDone
	l.mu.Unlock()
	if fail {
		return errStore
	}
	return l.Memory.Finish(ctx, s, f, attempt, o, now)
}

// A ledger that fails shows in job_ledger_errors_total with the failed
// call as op, and a final failure in job_run_failed_total.
func TestObserverCountsLedgerErrorsAndFinalFailures(t *testing.T) {
	t.Parallel()
	rdb := redistest.Real(t)
	leases, err := lease.New(rdb, lease.Options{Prefix: redistest.Prefix(t, rdb) + "lease:"})
	require.NoError(t, err)
	l := &failingLedger{Memory: ledgertest.NewMemory()}
	l.set(true, false)
	obs, err := schedprom.New(schedprom.Options{})
	require.NoError(t, err)
	s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: l, Observer: obs})
	require.NoError(t, err)
	require.NoError(t, s.Register(scheduler.Job{
		Name: "flaky", Spec: "* * * * * *", LeaseTTL: time.Second, MaxAttempts: 1,
		Run: func(context.Context, scheduler.Run) error { return scheduler.Permanent(errors.New("bad input")) },
	}))
	require.NoError(t, s.Start(context.Background()))
	defer func() { require.NoError(t, s.Stop(context.Background())) }()

	errs := func(op string) float64 {
		return value(t, obs, "holdfast_job_ledger_errors_total", map[string]string{"job": "flaky", "op": op})
	}
	testwait.Until(t, 10*time.Second, "a State error counted", func() bool { return errs("state") >= 1 })
	require.Zero(t, errs("finish"))

	l.set(false, true)
	testwait.Until(t, 10*time.Second, "a Finish error counted", func() bool { return errs("finish") >= 1 })

	l.set(false, false)
	final := map[string]string{"job": "flaky", "class": string(ledger.ClassPermanent), "final": "true"}
	testwait.Until(t, 10*time.Second, "a final failure counted", func() bool {
		return value(t, obs, "holdfast_job_run_failed_total", final) >= 1
	})
}

// value is the value of the counter name{labels} of o (0 when absent).
func value(t *testing.T, o *schedprom.Observer, name string, labels map[string]string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(o))
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, lp := range m.GetLabel() {
				got[lp.GetName()] = lp.GetValue()
			}
			for k, v := range labels {
				if got[k] != v {
					continue metrics
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}
