package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/ledgertest"
)

// Issue 37, 4: 13 slots were skipped while `holdfast job ls` showed LAST
// STATUS succeeded. JobStatus counts the skipped (and missed) and the
// failed (and abandoned) records of the last hour, across partitions; on
// a job with more than 100 records in the hour, from the oldest record
// read, so that the counts are exact for the window they name.
func TestJobStatusCountsRecentSkipsAndFailures(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	ldg := ledgertest.NewMemory()
	leases, err := lease.New(redistest.Mini(t), lease.Options{})
	require.NoError(t, err)
	s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ldg, Clock: clock.NewFake(now)})
	require.NoError(t, err)
	run := func(context.Context, scheduler.Run) error { return nil }
	require.NoError(t, s.Register(scheduler.Job{Name: "bill", Spec: "* * * * *", Partitions: []string{"eu", "us"}, Run: run}))
	require.NoError(t, s.Register(scheduler.Job{Name: "tick", Spec: "* * * * * *", Run: run}))

	fenceOf := func(job, p string) ledger.Fence {
		return ledger.Fence{Scope: ledger.UnitScope(job, p), Token: 7, Owner: "o"}
	}
	skip := func(job, p string, ago time.Duration, status ledger.Status) {
		t.Helper()
		require.NoError(t, ldg.Skip(ctx, ledger.Slot{Job: job, At: now.Add(-ago), Partition: p}, fenceOf(job, p), status, "overlap", now))
	}
	finish := func(p string, ago time.Duration, status ledger.Status) {
		t.Helper()
		slot := ledger.Slot{Job: "bill", At: now.Add(-ago), Partition: p}
		n, _, err := ldg.Begin(ctx, slot, fenceOf("bill", p), 3, slot.At)
		require.NoError(t, err)
		require.NoError(t, ldg.Finish(ctx, slot, fenceOf("bill", p), n, ledger.Outcome{Status: status, Error: "x"}, slot.At.Add(time.Second)))
	}
	skip("bill", "eu", 10*time.Minute, ledger.StatusSkipped)
	skip("bill", "us", 11*time.Minute, ledger.StatusSkipped)
	skip("bill", "us", 20*time.Minute, ledger.StatusMissed)
	finish("eu", 30*time.Minute, ledger.StatusFailed)
	finish("eu", 2*time.Hour, ledger.StatusFailed)        // before the window
	skip("bill", "eu", 3*time.Hour, ledger.StatusSkipped) // before the window
	finish("us", time.Minute, ledger.StatusSucceeded)

	st, err := s.JobStatus(ctx, "bill")
	require.NoError(t, err)
	require.Equal(t, ledger.StatusSucceeded, st.Last.Status, "the last status hides the skips")
	require.Equal(t, 3, st.Skipped)
	require.Equal(t, 1, st.Failed)
	require.Equal(t, now.Add(-time.Hour), st.Since)

	// 150 skipped seconds: the 100 newest are read, and counted from the
	// oldest of them.
	for i := 1; i <= 150; i++ {
		skip("tick", "", time.Duration(i)*time.Second, ledger.StatusSkipped)
	}
	st, err = s.JobStatus(ctx, "tick")
	require.NoError(t, err)
	require.Equal(t, 100, st.Skipped)
	require.Equal(t, now.Add(-100*time.Second), st.Since)
}
