package scheduler

import (
	"context"
	"fmt"
	"runtime/pprof"
	"strings"
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
		// The replica's goroutines carry the test's name (goroutineIn).
		pprof.SetGoroutineLabels(pprof.WithLabels(context.Background(), pprof.Labels("test", t.Name())))
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
		// It waits as a record: the run's goroutine ended (its stack,
		// grown by the run, is free for the next run's).
		testwait.Until(t, 10*time.Second, "the first run's goroutine ends", func() bool {
			return !goroutineIn(t, "scheduler.(*Scheduler).unitFrom")
		})

		unhold()
		require.Equal(t, second, <-ran)
		slot := t0.Add(time.Second)
		testwait.Until(t, 10*time.Second, "both outcomes recorded", func() bool {
			return s.status("gate", "a", slot) == ledger.StatusSucceeded && s.status("gate", "b", slot) == ledger.StatusSucceeded
		})
		require.EqualValues(t, 2, l.finishes.Load())
		// The finisher counts a record until it went on with the unit
		// (after the ledger's write, which the status shows).
		testwait.Until(t, 10*time.Second, "no record waits", func() bool { return sched.claims.waiters() == 0 })
		require.EqualValues(t, 2, l.claims.Load(), "two batch claims")
	})
}

// newTestGate returns a claimGate whose finishers run in wg and send the
// records they make on made.
func newTestGate(wg *sync.WaitGroup) (g *claimGate, made chan *later) {
	made = make(chan *later, 8)
	return newClaimGate(wg.Go, func(r *later) { made <- r }), made
}

// requireMade requires want to be the next record made.
func requireMade(t *testing.T, made <-chan *later, want *later) {
	t.Helper()
	select {
	case r := <-made:
		require.Same(t, want, r)
	case <-time.After(10 * time.Second):
		t.Fatal("the record was not made")
	}
}

// A record handed to the claimGate waits for the batch claims under way
// when it was handed over, not for one begun later (a claim every second
// that never lets up would hold an outcome back for ever), and not at all
// with no batch under way, past maxDeferredFinishes waiting records or
// once the runs' lifetime ended (end).
func TestClaimGateWaitsForTheBatchesUnderWayOnly(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	defer wg.Wait()
	g, made := newTestGate(&wg)

	require.False(t, g.hold(new(later)), "no batch under way: the caller records at once")

	leave1 := g.enter()
	r1 := new(later)
	require.True(t, g.hold(r1))
	require.Equal(t, 1, g.waiters())
	leave2 := g.enter() // begun after the record came: not waited for
	require.Empty(t, made)
	leave1()
	requireMade(t, made, r1)
	testwait.Until(t, 10*time.Second, "no record waits", func() bool { return g.waiters() == 0 })

	r2 := new(later)
	require.True(t, g.hold(r2), "batch 2 is under way")
	require.Empty(t, made)
	g.mu.Lock()
	full := g.wait
	g.wait = append(g.wait, make([]*later, maxDeferredFinishes-1)...)
	g.mu.Unlock()
	require.False(t, g.hold(new(later)), "past maxDeferredFinishes a record does not wait")
	g.mu.Lock()
	g.wait = full
	g.mu.Unlock()

	g.end() // the runs' lifetime ended
	requireMade(t, made, r2)
	require.False(t, g.hold(new(later)), "once the runs' lifetime ended nothing waits")
	leave2()
	g.mu.Lock()
	require.Empty(t, g.active)
	require.Empty(t, g.wait)
	g.mu.Unlock()
}

// A record waits for every batch begun before it that is still under
// way, whatever order the batches end in.
func TestClaimGateWaitsForBatchesEndingInAnyOrder(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	defer wg.Wait()
	g, made := newTestGate(&wg)
	leave1, leave2 := g.enter(), g.enter()
	r1 := new(later)
	require.True(t, g.hold(r1)) // waits for 1 and 2
	leave2()
	r2 := new(later)
	require.True(t, g.hold(r2)) // waits for 1
	leave3 := g.enter()
	r3 := new(later)
	require.True(t, g.hold(r3)) // waits for 1 and 3
	require.Empty(t, made)
	leave1()
	got := []*later{<-made, <-made}
	require.ElementsMatch(t, []*later{r1, r2}, got)
	require.Empty(t, made, "r3 waits for batch 3")
	testwait.Until(t, 10*time.Second, "r3 alone waits", func() bool { return g.waiters() == 1 })
	leave3()
	requireMade(t, made, r3)
}

// The records whose wait is over are made by at most maxFinishers
// goroutines, each making one after the other, and every one is made.
func TestClaimGateMakesRecordsInBoundedFinishers(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	defer wg.Wait()
	var started, running, most atomic.Int32
	unblock := make(chan struct{})
	var made atomic.Int32
	g := newClaimGate(func(f func()) {
		started.Add(1)
		wg.Go(f)
	}, func(*later) {
		n := running.Add(1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		<-unblock
		running.Add(-1)
		made.Add(1)
	})
	const records = maxFinishers + 44
	leave := g.enter()
	for range records {
		require.True(t, g.hold(new(later)))
	}
	require.Zero(t, started.Load(), "no finisher while the batch is under way")
	leave()
	testwait.Until(t, 10*time.Second, "every finisher makes a record", func() bool { return running.Load() == maxFinishers })
	require.EqualValues(t, maxFinishers, started.Load())
	close(unblock)
	testwait.Until(t, 10*time.Second, "every record made", func() bool { return made.Load() == records })
	require.EqualValues(t, maxFinishers, most.Load())
	testwait.Until(t, 10*time.Second, "the finishers end", func() bool { return g.waiters() == 0 })
	g.mu.Lock()
	require.Zero(t, g.finishers)
	g.mu.Unlock()
}

// goroutineIn reports whether a goroutine labeled with t's name (the
// pprof label "test") is in fn (a function's name as stack traces print
// it, package and receiver).
func goroutineIn(t *testing.T, fn string) bool {
	var b strings.Builder
	require.NoError(t, pprof.Lookup("goroutine").WriteTo(&b, 1))
	label := fmt.Sprintf("%q:%q", "test", t.Name())
	for group := range strings.SplitSeq(b.String(), "\n\n") {
		if strings.Contains(group, label) && strings.Contains(group, fn+"+") {
			return true
		}
	}
	return false
}
