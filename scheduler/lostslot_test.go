package scheduler_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// onCatchUpPolicies runs fn on fake time (onFakeTime, from start) under
// both overlap policies that run catch-up slots: in turn (forbid) and
// under slot leases of their own (allow).
func onCatchUpPolicies(t *testing.T, start time.Time, fn func(t *testing.T, r *rig, policy scheduler.OverlapPolicy)) {
	t.Helper()
	for name, policy := range map[string]scheduler.OverlapPolicy{"Forbid": scheduler.OverlapForbid, "Allow": scheduler.OverlapAllow} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			onFakeTime(t, start, func(t *testing.T, r *rig) { fn(t, r, policy) })
		})
	}
}

// failingBegin is a ledger whose Begin of one slot fails once, as a Redis
// or PostgreSQL error would: nothing is written for it.
type failingBegin struct {
	ledger.Ledger
	mu     sync.Mutex
	at     time.Time
	failed int
}

func (l *failingBegin) Begin(ctx context.Context, slot ledger.Slot, f ledger.Fence, maxAttempts int, now time.Time) (int, int, error) {
	l.mu.Lock()
	if slot.At.Equal(l.at) && l.failed == 0 {
		l.failed++
		l.mu.Unlock()
		return 0, 0, errors.New("ledger unreachable (test)")
	}
	l.mu.Unlock()
	return l.Ledger.Begin(ctx, slot, f, maxAttempts, now)
}

// A catch-up claim whose Begin of one slot fails must not go on to begin
// the later ones: the ledger's last begun slot would move past the failed
// one, no later plan would look at it, and the slot would be lost, neither
// run nor recorded. The claim stops and claims again a second later, when
// the failed slot is caught up with the rest. Both overlap policies that
// run catch-up slots are covered: in turn (forbid) and under slot leases
// of their own (allow).
func TestFakeTimeSlotWhoseBeginFailedIsNotLost(t *testing.T) {
	t.Parallel()
	onCatchUpPolicies(t, utc(9, 59, 58), func(t *testing.T, r *rig, policy scheduler.OverlapPolicy) {
		g := newGated(r)
		job := scheduler.Job{Name: "flaky", Spec: "* * * * *", Overlap: policy, MaxCatchUp: 10, Run: g.run}
		a := r.replica(0, job)
		r.tick(5*time.Second, time.Second)
		stopOnFakeTime(r.clk, a, context.Background())
		r.scheds = nil
		r.clk.Advance(5 * time.Minute) // down until 10:05:03: 10:01..10:05 to catch up

		flaky := &failingBegin{Ledger: r.ledger, at: utc(10, 2, 0)}
		r.replicaWith(0, func(c *scheduler.Options) { c.Ledger = flaky }, job)
		r.tick(5*time.Second, 100*time.Millisecond)

		require.Equal(t, 1, flaky.failed, "the fault fired")
		for at := utc(10, 0, 0); !at.After(utc(10, 5, 0)); at = at.Add(time.Minute) {
			rec := r.record("flaky", at)
			require.Equal(t, ledger.StatusSucceeded, rec.Status, "slot %v", at)
			require.Equal(t, 1, rec.Attempt, "slot %v ran once", at)
		}
		require.ElementsMatch(t, []time.Time{utc(10, 0, 0), utc(10, 1, 0), utc(10, 2, 0), utc(10, 3, 0), utc(10, 4, 0), utc(10, 5, 0)}, g.slots())
	})
}

// Under OverlapAllow, a slot whose lease is held by a holder that stalled
// between its lease and its Begin (a process frozen there) is not settled
// by the held lease: the claim stops before beginning a later slot, which
// would hide the unbegun one from every later plan, and claims again. Once
// the stalled holder's lease is gone the slot is caught up with the rest.
// Without that, the chaos scenario scheduler-mix lost a slot: no record,
// no run.
func TestFakeTimeAllowSlotWhoseLeaseHolderStalledIsNotLost(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(9, 59, 58), func(t *testing.T, r *rig) {
		g := newGated(r)
		job := scheduler.Job{Name: "stalled", Spec: "* * * * *", Overlap: scheduler.OverlapAllow, MaxCatchUp: 10, Run: g.run}
		a := r.replica(0, job)
		r.tick(5*time.Second, time.Second)
		stopOnFakeTime(r.clk, a, context.Background())
		r.scheds = nil
		r.clk.Advance(5 * time.Minute) // down until 10:05:03: 10:01..10:05 to catch up

		// A holder of 10:02's slot lease that never got to its Begin.
		stalled, err := r.leases.TryAcquire(context.Background(), ledger.SlotScope(ledger.Slot{Job: "stalled", At: utc(10, 2, 0)}), time.Minute)
		require.NoError(t, err)
		r.replica(0, job)
		r.tick(3*time.Second, 100*time.Millisecond)
		require.Equal(t, ledger.StatusSucceeded, r.record("stalled", utc(10, 1, 0)).Status, "the slot before ran")
		require.Equal(t, map[time.Time]ledger.Status{utc(10, 2, 0): "", utc(10, 3, 0): ""},
			r.statuses("stalled", utc(10, 2, 0), utc(10, 3, 0), time.Minute), "10:02 and the slots after it wait for the stalled holder")

		require.NoError(t, stalled.Release(context.Background())) // its lease runs out
		r.tick(3*time.Second, 100*time.Millisecond)
		for at := utc(10, 0, 0); !at.After(utc(10, 5, 0)); at = at.Add(time.Minute) {
			rec := r.record("stalled", at)
			require.Equal(t, ledger.StatusSucceeded, rec.Status, "slot %v", at)
			require.Equal(t, 1, rec.Attempt, "slot %v ran once", at)
		}
		require.ElementsMatch(t, []time.Time{utc(10, 0, 0), utc(10, 1, 0), utc(10, 2, 0), utc(10, 3, 0), utc(10, 4, 0), utc(10, 5, 0)}, g.slots())
	})
}

// A slot whose holder crashed mid-run is taken over at the unit's next
// claim however old it is by then: a job that fires every minute with a
// CatchUpWindow of 30 s, whose slot 10:00 a holder began and then died
// (its lease released here rather than waited out), is run again as
// attempt 2 by the next fire's claim, 10:01, with 10:01 itself. It stayed
// running for good, outside the window, where no Retry could reach it (a
// fresh user's trial: kill -9 of the replica running the slot).
func TestFakeTimeCrashedHoldersSlotIsTakenOverOutsideTheWindow(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(9, 59, 58), func(t *testing.T, r *rig) {
		ctx := context.Background()
		var (
			mu  sync.Mutex
			ran []time.Time
		)
		job := scheduler.Job{Name: "crashy", Spec: "* * * * *", CatchUpWindow: 30 * time.Second, LeaseTTL: 3 * time.Second,
			Run: func(_ context.Context, run scheduler.Run) error {
				mu.Lock()
				defer mu.Unlock()
				ran = append(ran, run.Slot.At)
				return nil
			}}
		r.replica(0, job)
		// The holder that crashes: it has the unit's lease at 10:00 and
		// begins the slot; the replica's claim of 10:00 finds the lease
		// held and leaves the slot to it.
		scope := ledger.UnitScope("crashy", "")
		l, err := r.leases.TryAcquire(ctx, scope, 3*time.Second)
		require.NoError(t, err)
		h := l.Holder()
		attempt, _, err := r.ledger.Begin(ctx, ledger.Slot{Job: "crashy", At: utc(10, 0, 0)},
			ledger.Fence{Scope: scope, Token: h.Token, Owner: h.Owner}, 3, utc(10, 0, 0))
		require.NoError(t, err)
		require.Equal(t, 1, attempt)
		r.advanceTo(utc(10, 0, 0))
		r.tick(5*time.Second, time.Second)
		require.Equal(t, ledger.StatusRunning, r.record("crashy", utc(10, 0, 0)).Status, "left to its holder")
		require.NoError(t, l.Release(ctx)) // the holder dies

		r.advanceTo(utc(10, 1, 0))
		r.tick(5*time.Second, time.Second)
		rec := r.record("crashy", utc(10, 0, 0))
		require.Equal(t, ledger.StatusSucceeded, rec.Status, "taken over")
		require.Equal(t, 2, rec.Attempt)
		require.Equal(t, ledger.StatusAbandoned, rec.Attempts[0].Status)
		require.Equal(t, ledger.StatusSucceeded, r.record("crashy", utc(10, 1, 0)).Status)
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, []time.Time{utc(10, 0, 0), utc(10, 1, 0)}, ran)
	})
}
