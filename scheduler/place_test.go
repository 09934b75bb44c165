package scheduler

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// heldClaimLedger is a joined redisledger whose second batch claim waits
// until hold is closed, having sent the lease names it was asked for on
// asked; it counts the finish and release calls.
type heldClaimLedger struct {
	*redisledger.Ledger
	claims   atomic.Int32
	asked    chan []string
	hold     chan struct{}
	finishes atomic.Int32
}

func (l *heldClaimLedger) ClaimAll(ctx context.Context, leases leasedriver.Backend, reqs []ledger.ClaimRequest, places int, now time.Time) ([]ledger.ClaimResult, error) {
	if len(reqs) > 0 && l.claims.Add(1) == 2 {
		var names []string
		for _, r := range reqs {
			names = append(names, r.Lease.Name)
		}
		l.asked <- names
		<-l.hold
	}
	return l.Ledger.ClaimAll(ctx, leases, reqs, places, now)
}

func (l *heldClaimLedger) FinishRelease(ctx context.Context, leases leasedriver.Backend, h leasedriver.Held, s ledger.Slot, f ledger.Fence, attempt int, o ledger.Outcome, now time.Time) (error, error) {
	l.finishes.Add(1)
	return l.Ledger.FinishRelease(ctx, leases, h, s, f, attempt, o, now)
}

// A run that ends its claim gives its place in the pool back before its
// outcome is recorded, and the recording (the joined finish and release)
// waits for the batch claim under way: with one place and two units due
// together, the batch claims the first unit, whose run ends and gives the
// place to the batch's claim of the second; the first outcome is recorded
// only once that claim was answered. Before, the place was held until the
// outcome was recorded, so the second claim came after the first finish.
func TestAnOutcomeWaitsForTheBatchClaimUnderWay(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		t0 := time.Unix(1_800_000_000, 0).UTC()
		clk := clock.NewFake(t0.Add(500 * time.Millisecond))
		l := &heldClaimLedger{asked: make(chan []string, 1), hold: make(chan struct{})}
		ran := make(chan string, 2)
		sched := s.started(t, Job{
			Name: "gate", Spec: everySecond, Partitions: []string{"a", "b"},
			StartAt: t0, EndAt: t0.Add(1500 * time.Millisecond),
			Run: func(_ context.Context, r Run) error { ran <- r.Partition; return nil },
		}, func(c *Options) {
			l.Ledger = c.Ledger.(*redisledger.Ledger)
			c.Ledger, c.MaxConcurrentClaims = l, 1
		}, onClock(clk))
		require.True(t, sched.grouped, "a joined ledger, in claim groups")
		var release sync.Once
		unhold := func() { release.Do(func() { close(l.hold) }) }
		t.Cleanup(unhold) // before the replica's Stop (cleanups run last first)
		tickAll(t, clk, 100*time.Millisecond, 100*time.Millisecond, new(atomic.Int64), sched)
		require.Zero(t, l.claims.Load(), "no batch claim before the slot")

		clk.Advance(500 * time.Millisecond) // the slot at t0+1s is due
		var asked []string
		select {
		case asked = <-l.asked:
		case <-time.After(10 * time.Second):
			t.Fatal("no second batch claim")
		}
		first := <-ran // the first claim's run has ended: the second claim had its place
		second := map[string]string{"a": "b", "b": "a"}[first]
		require.Equal(t, []string{ledger.UnitScope("gate", second)}, asked, "the second claim is the other unit's")
		testwait.Until(t, 10*time.Second, "the first outcome waits for the claim", func() bool {
			return sched.claims.waiters() == 1
		})
		require.Zero(t, l.finishes.Load(), "no outcome recorded while the batch claim is under way")

		unhold()
		require.Equal(t, second, <-ran)
		slot := t0.Add(time.Second)
		testwait.Until(t, 10*time.Second, "both outcomes recorded", func() bool {
			return s.status("gate", "a", slot) == ledger.StatusSucceeded && s.status("gate", "b", slot) == ledger.StatusSucceeded
		})
		require.EqualValues(t, 2, l.finishes.Load())
		require.Zero(t, sched.claims.waiters())
		require.EqualValues(t, 2, l.claims.Load(), "two batch claims")
	})
}

// claimGate.wait waits for the batch claims under way when it is called,
// not for one begun later (a claim every second that never lets up would
// hold an outcome back for ever), and not at all past
// maxDeferredFinishes waiting outcomes or once done is closed.
func TestClaimGateWaitsForTheBatchesUnderWayOnly(t *testing.T) {
	t.Parallel()
	var g claimGate
	waited := func(done <-chan struct{}) <-chan struct{} {
		c := make(chan struct{})
		go func() {
			defer close(c)
			g.wait(done)
		}()
		return c
	}
	select {
	case <-waited(nil):
	case <-time.After(10 * time.Second):
		t.Fatal("a wait with no batch under way returns at once")
	}

	leave1 := g.enter()
	w := waited(nil)
	testwait.Until(t, 10*time.Second, "the outcome waits", func() bool { return g.waiters() == 1 })
	leave2 := g.enter() // begun after the wait: not waited for
	leave1()
	select {
	case <-w:
	case <-time.After(10 * time.Second):
		t.Fatal("the wait ends with the batch under way at its call")
	}
	require.Zero(t, g.waiters())

	stop := make(chan struct{})
	w = waited(stop)
	testwait.Until(t, 10*time.Second, "the outcome waits", func() bool { return g.waiters() == 1 })
	close(stop)
	<-w
	require.Zero(t, g.waiters())

	g.mu.Lock()
	g.waiting = maxDeferredFinishes
	g.mu.Unlock()
	select {
	case <-waited(nil):
	case <-time.After(10 * time.Second):
		t.Fatal("past maxDeferredFinishes an outcome does not wait")
	}
	leave2()
	g.mu.Lock()
	require.Empty(t, g.active)
	g.mu.Unlock()
}
