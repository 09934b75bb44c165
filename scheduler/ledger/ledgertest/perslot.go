package ledgertest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// perSlotCases cover slot-scoped fences (ledger.SlotScope, OverlapAllow): each slot has a
// fence of its own, checked and raised instead of the (job, partition)'s,
// with the same acceptance rule.
var perSlotCases = []testCase{
	{"PerSlotHoldersOfOneJobInterleave", testPerSlotInterleave},
	{"PerSlotStaleTokenIsRefusedAndChangesNothing", testPerSlotStaleRefused},
	{"PerSlotTakeoverAbandonsAndFencesOutTheOldHolder", testPerSlotTakeover},
	{"PerSlotAndPairFencesDoNotRaiseEachOther", testPerSlotLeavesPairFence},
	{"PerSlotBegunSlotsShowInState", testPerSlotState},
	{"ConcurrentPerSlotHoldersAllWrite", testPerSlotConcurrent},
	{"PerSlotBeginWithAUnitFenceFencesOutAnOlderPlanner", testPerSlotUnitFence},
}

// OverlapAllow's planners hold the pair's lease while they plan, and begin
// each slot under that slot's own lease, presenting their own fence as
// Fence.Planner. Planner 2 (unit holder 20) begins slot 1 so: planner 1 (unit
// holder 10, which lost the job lease) can then no longer Skip slot 2, nor
// begin one with its unit fence; and a Begin whose unit fence is stale
// begins nothing.
func testPerSlotUnitFence(t *testing.T, x *fixture) {
	ctx := t.Context()
	p1, p2 := holder(10), holder(20)
	s1, s2 := x.slot(1), x.slot(2)
	// Planner 1 was active before: it raised the pair's fence to 10.
	require.NoError(t, x.ledger.Skip(ctx, x.slot(0), p1, ledger.StatusSkipped, "missed", x.now(0, time.Second)))

	begin := perSlot(100)
	begin.Planner = &p2
	n, _ := x.beginLeft(s1, begin, 3, x.now(1, time.Second))
	require.Equal(t, 1, n)

	err := x.ledger.Skip(ctx, s2, p1, ledger.StatusSkipped, "missed", x.now(1, 2*time.Second))
	requireStale(t, err, p1.Token, p2.Token, "the older planner's Skip after the newer one began a slot")
	x.requireAbsent(s2)

	old := perSlot(200)
	old.Planner = &p1
	_, _, err = x.ledger.Begin(ctx, s2, old, 3, x.now(1, 3*time.Second))
	requireStale(t, err, p1.Token, p2.Token, "a Begin under the older planner's unit fence")
	x.requireAbsent(s2)

	// The run goes on under its slot fence alone, after its planner's
	// lease is gone and a newer planner raised the pair's fence.
	p3 := holder(30)
	require.NoError(t, x.ledger.Skip(ctx, x.slot(3), p3, ledger.StatusSkipped, "missed", x.now(1, 4*time.Second)))
	run := perSlot(100)
	require.NoError(t, x.ledger.Heartbeat(ctx, s1, run, 1, x.now(1, 5*time.Second)))
	x.succeed(s1, run, 1, x.now(1, 6*time.Second))
	require.Equal(t, ledger.StatusSucceeded, x.get(s1).Status)
}

// perSlot returns holder n's fence as a lease on one slot.
func perSlot(n int) ledger.Fence {
	f := holder(n)
	f.Scope = slotMark
	return f
}

// Runs of one (job, partition) overlap, each under a lease of its own slot:
// holder 2 begins slot 2 while holder 1 runs slot 1, and their heartbeats
// and finishes interleave. With per-slot fences both succeed. With the
// pair's fence (partition "pair", the same steps) holder 1 is stale from
// the moment holder 2 began.
func testPerSlotInterleave(t *testing.T, x *fixture) {
	ctx := t.Context()
	run := func(p string, a, b ledger.Fence) (n1, n2 int, errs []error) {
		s1, s2 := x.slotIn(p, 1), x.slotIn(p, 2)
		n1 = x.begin(s1, a, 3, x.now(1, time.Second))
		n2 = x.begin(s2, b, 3, x.now(2, time.Second))
		errs = append(errs,
			x.ledger.Heartbeat(ctx, s1, a, n1, x.now(2, 2*time.Second)),
			x.ledger.Heartbeat(ctx, s2, b, n2, x.now(2, 3*time.Second)),
			x.ledger.Heartbeat(ctx, s1, a, n1, x.now(2, 4*time.Second)),
			x.ledger.Finish(ctx, s1, a, n1, ledger.Outcome{Status: ledger.StatusSucceeded}, x.now(2, 5*time.Second)),
		)
		x.succeed(s2, b, n2, x.now(2, 6*time.Second))
		return n1, n2, errs
	}

	// Per-slot fences: every write is accepted.
	a, b := perSlot(1), perSlot(2)
	n1, n2, errs := run("", a, b)
	require.Equal(t, 1, n1)
	require.Equal(t, 1, n2)
	for i, err := range errs {
		require.NoError(t, err, "per-slot write %d of holder 1 or 2", i)
	}
	for _, c := range []struct {
		i int
		f ledger.Fence
	}{{1, a}, {2, b}} {
		rec := x.get(x.slot(c.i))
		require.Equal(t, ledger.StatusSucceeded, rec.Status, "slot %d", c.i)
		require.Equal(t, 1, rec.Attempt, "slot %d", c.i)
		require.Len(t, rec.Attempts, 1, "slot %d", c.i)
		at := rec.Attempts[0]
		require.Equal(t, ledger.StatusSucceeded, at.Status, "slot %d", c.i)
		require.Equal(t, c.f.Token, at.Token, "slot %d", c.i)
		require.Equal(t, c.f.Owner, at.Owner, "slot %d", c.i)
	}
	rec1 := x.get(x.slot(1))
	requireTime(t, x.now(2, 4*time.Second), rec1.Attempts[0].Heartbeat, "slot 1's last heartbeat")
	requireTime(t, x.now(2, 5*time.Second), rec1.Attempts[0].Finished, "slot 1's finish")
	x.requireOpen(x.state("", x.at(0)))

	// The contrast: the same steps under the pair's fence.
	pa, pb := holder(1), holder(2)
	_, _, errs = run("pair", pa, pb)
	for i, err := range []string{"Heartbeat", "", "Heartbeat again", "Finish"} {
		if err == "" {
			require.NoError(t, errs[i], "holder 2's Heartbeat under the pair's fence")
			continue
		}
		requireStale(t, errs[i], pa.Token, pb.Token, "pair-fenced holder 1's "+err+" after holder 2 began")
	}
	rec := x.get(x.slotIn("pair", 1))
	require.Equal(t, ledger.StatusRunning, rec.Status, "pair-fenced slot 1, its holder fenced out")
	require.Equal(t, pa.Owner, rec.Attempts[0].Owner)
	requireTime(t, x.now(1, time.Second), rec.Attempts[0].Heartbeat, "pair-fenced slot 1's heartbeat, refused")
	require.Equal(t, ledger.StatusSucceeded, x.get(x.slotIn("pair", 2)).Status)
	x.requireOpen(x.state("pair", x.at(0)), x.at(1))
}

// Per slot, the acceptance rule holds as for the pair: holder 5 runs
// slot 1; a smaller token, the same token by another owner, and a smaller
// token by holder 5's owner are refused on every fenced transition of
// slot 1 and change nothing. The same tokens are accepted on another slot,
// whose fence is its own.
func testPerSlotStaleRefused(t *testing.T, x *fixture) {
	ctx := t.Context()
	cur := perSlot(5)
	s1 := x.slot(1)
	n := x.begin(s1, cur, 3, x.now(1, time.Second))
	require.NoError(t, x.ledger.Heartbeat(ctx, s1, cur, n, x.now(1, 2*time.Second)))
	before := x.get(s1)
	stBefore := x.state("", x.at(0))

	stale := []struct {
		what string
		f    ledger.Fence
	}{
		{"smaller token", ledger.Fence{Token: cur.Token - 1, Owner: holder(4).Owner, Scope: slotMark}},
		{"equal token, another owner", ledger.Fence{Token: cur.Token, Owner: "intruder", Scope: slotMark}},
		{"smaller token, current owner", ledger.Fence{Token: cur.Token - 1, Owner: cur.Owner, Scope: slotMark}},
	}
	for _, c := range stale {
		now := x.now(1, 30*time.Second)
		_, _, err := x.ledger.Begin(ctx, s1, c.f, 3, now)
		requireStale(t, err, c.f.Token, cur.Token, c.what+": Begin")
		err = x.ledger.Heartbeat(ctx, s1, c.f, n, now)
		requireStale(t, err, c.f.Token, cur.Token, c.what+": Heartbeat")
		err = x.ledger.Finish(ctx, s1, c.f, n, ledger.Outcome{Status: ledger.StatusSucceeded}, now)
		requireStale(t, err, c.f.Token, cur.Token, c.what+": Finish")
		err = x.ledger.Skip(ctx, s1, c.f, ledger.StatusSkipped, "overlap", now)
		requireStale(t, err, c.f.Token, cur.Token, c.what+": Skip")
	}

	requireSameRecord(t, before, x.get(s1), "the running slot after stale writes")
	stAfter := x.state("", x.at(0))
	requireTime(t, stBefore.Last, stAfter.Last, "State.Last")
	require.Equal(t, x.openAt(stBefore), x.openAt(stAfter), "State.Open")

	// Another slot's fence is its own: a smaller token than holder 5's
	// begins and finishes it.
	lower := perSlot(4)
	s2 := x.slot(2)
	require.Equal(t, 1, x.begin(s2, lower, 3, x.now(2, time.Second)))
	x.succeed(s2, lower, 1, x.now(2, 2*time.Second))
	require.NoError(t, x.ledger.Skip(ctx, x.slot(3), lower, ledger.StatusSkipped, "overlap", x.now(3, 0)))
	require.Equal(t, ledger.StatusSkipped, x.get(x.slot(3)).Status)

	// Slot 1's fence was neither lowered nor handed over.
	require.NoError(t, x.ledger.Heartbeat(ctx, s1, cur, n, x.now(2, 40*time.Second)))
	x.succeed(s1, cur, n, x.now(2, 50*time.Second))
	rec := x.get(s1)
	require.Equal(t, ledger.StatusSucceeded, rec.Status)
	require.Equal(t, cur.Owner, rec.Attempts[0].Owner)
}

// A larger per-slot token takes a running slot over: the old attempt is
// abandoned and its holder can no longer heartbeat, finish, begin or skip
// that slot, while another slot it runs is untouched.
func testPerSlotTakeover(t *testing.T, x *fixture) {
	ctx := t.Context()
	old, next := perSlot(1), perSlot(2)
	s1, s2 := x.slot(1), x.slot(2)
	require.Equal(t, 1, x.begin(s1, old, 3, x.now(1, time.Second)))
	require.Equal(t, 1, x.begin(s2, old, 3, x.now(2, time.Second)))
	n, left := x.beginLeft(s1, next, 3, x.now(2, 2*time.Second))
	require.Equal(t, 2, n, "the takeover's attempt")
	require.Equal(t, 1, left, "attempts left after the takeover's attempt 2 of 3")

	rec := x.get(s1)
	require.Equal(t, ledger.StatusRunning, rec.Status)
	require.Equal(t, 2, rec.Attempt)
	require.Len(t, rec.Attempts, 2)
	require.Equal(t, ledger.StatusAbandoned, rec.Attempts[0].Status, "the old holder's attempt")
	require.Equal(t, old.Token, rec.Attempts[0].Token)
	require.Equal(t, ledger.StatusRunning, rec.Attempts[1].Status)
	require.Equal(t, next.Token, rec.Attempts[1].Token)
	require.Equal(t, next.Owner, rec.Attempts[1].Owner)
	before := rec

	now := x.now(2, 10*time.Second)
	err := x.ledger.Finish(ctx, s1, old, 1, ledger.Outcome{Status: ledger.StatusSucceeded}, now)
	requireStale(t, err, old.Token, next.Token, "Finish by the holder whose slot was taken over")
	err = x.ledger.Heartbeat(ctx, s1, old, 1, now)
	requireStale(t, err, old.Token, next.Token, "Heartbeat by the holder whose slot was taken over")
	_, _, err = x.ledger.Begin(ctx, s1, old, 3, now)
	requireStale(t, err, old.Token, next.Token, "Begin by the holder whose slot was taken over")
	err = x.ledger.Skip(ctx, s1, old, ledger.StatusSkipped, "overlap", now)
	requireStale(t, err, old.Token, next.Token, "Skip by the holder whose slot was taken over")
	requireSameRecord(t, before, x.get(s1), "the taken-over slot after the old holder's writes")

	// The old holder's other slot is fenced by its own lease: it goes on.
	require.NoError(t, x.ledger.Heartbeat(ctx, s2, old, 1, x.now(2, 11*time.Second)))
	x.succeed(s2, old, 1, x.now(2, 12*time.Second))
	require.Equal(t, ledger.StatusSucceeded, x.get(s2).Status)

	x.succeed(s1, next, 2, x.now(2, 20*time.Second))
	rec = x.get(s1)
	require.Equal(t, ledger.StatusSucceeded, rec.Status)
	require.Equal(t, ledger.StatusAbandoned, rec.Attempts[0].Status)
	require.Equal(t, ledger.StatusSucceeded, rec.Attempts[1].Status)
}

// A per-slot write leaves the pair's fence as it is, and a pair-fenced
// write leaves every slot's fence as it is.
func testPerSlotLeavesPairFence(t *testing.T, x *fixture) {
	ctx := t.Context()
	huge := perSlot(1_000_000)
	pair := holder(2)
	s1, s2 := x.slot(1), x.slot(2)

	// After a per-slot Begin with a huge token, a pair-fenced holder with a
	// much smaller one still begins another slot, and both go on.
	n1 := x.begin(s1, huge, 3, x.now(1, time.Second))
	n2 := x.begin(s2, pair, 3, x.now(2, time.Second))
	require.Equal(t, 1, n1)
	require.Equal(t, 1, n2)
	require.NoError(t, x.ledger.Heartbeat(ctx, s1, huge, n1, x.now(2, 2*time.Second)))
	require.NoError(t, x.ledger.Heartbeat(ctx, s2, pair, n2, x.now(2, 3*time.Second)))
	x.succeed(s2, pair, n2, x.now(2, 4*time.Second))
	x.succeed(s1, huge, n1, x.now(2, 5*time.Second))
	require.Equal(t, ledger.StatusSucceeded, x.get(s1).Status)
	require.Equal(t, ledger.StatusSucceeded, x.get(s2).Status)

	// The pair's fence holds the pair-fenced holder's token, not the
	// per-slot one: a smaller pair-fenced token is refused against it.
	_, _, err := x.ledger.Begin(ctx, x.slot(3), holder(1), 3, x.now(3, 0))
	requireStale(t, err, holder(1).Token, pair.Token, "pair-fenced Begin below the pair's fence")
	x.requireAbsent(x.slot(3))

	// Pair-fenced writes raise no slot fence. A pair-fenced holder with a
	// large token skips slot 4 and begins slot 5; a smaller per-slot token
	// is then not refused as stale on either: slot 4 is done, and slot 5
	// is taken over.
	big, small := holder(50), perSlot(10)
	s4, s5 := x.slot(4), x.slot(5)
	require.NoError(t, x.ledger.Skip(ctx, s4, big, ledger.StatusSkipped, "overlap", x.now(4, 0)))
	require.Equal(t, 1, x.begin(s5, big, 3, x.now(5, time.Second)))
	n, _, err := x.ledger.Begin(ctx, s4, small, 3, x.now(5, 2*time.Second))
	require.ErrorIs(t, err, ledger.ErrSlotDone, "per-slot Begin of the skipped slot returned attempt %d", n)
	require.False(t, errors.Is(err, fence.ErrStaleToken), "per-slot Begin of the skipped slot: %v", err)
	require.Equal(t, 2, x.begin(s5, small, 3, x.now(5, 3*time.Second)), "per-slot takeover of slot 5")
	x.succeed(s5, small, 2, x.now(5, 4*time.Second))
	rec := x.get(s5)
	require.Equal(t, ledger.StatusSucceeded, rec.Status)
	require.Equal(t, ledger.StatusAbandoned, rec.Attempts[0].Status)
	require.Equal(t, big.Owner, rec.Attempts[0].Owner)
	require.Equal(t, small.Owner, rec.Attempts[1].Owner)
}

// State reads per-slot begun, skipped and missed slots as it does
// pair-fenced ones: Last is the latest of them, Open lists running ones
// and failures with a retry, and the first per-slot write starts the
// horizon.
func testPerSlotState(t *testing.T, x *fixture) {
	ctx := t.Context()
	a, b := perSlot(1), perSlot(2)

	n2 := x.begin(x.slot(2), b, 3, x.now(2, 0))
	st := x.state("", time.Time{})
	requireTime(t, x.at(2), st.Last, "after a per-slot Begin of slot 2")
	require.False(t, st.Horizon.IsZero(), "State.Horizon after a first per-slot Begin")
	horizon := st.Horizon

	// An earlier slot begun under its own lease does not move Last back.
	n1 := x.begin(x.slot(1), a, 3, x.now(2, time.Second))
	st = x.state("", x.at(0))
	requireTime(t, x.at(2), st.Last, "after a per-slot Begin of the earlier slot 1")
	x.requireOpen(st, x.at(1), x.at(2))

	// A failure with a retry stays open, with its RetryAt; a success
	// leaves.
	retry := x.now(2, 90*time.Second)
	x.finish(x.slot(1), a, n1, ledger.Outcome{
		Status: ledger.StatusFailed, Class: ledger.ClassRetryable, Error: "again", RetryAt: retry,
	}, x.now(2, 30*time.Second))
	x.succeed(x.slot(2), b, n2, x.now(2, 31*time.Second))
	st = x.state("", x.at(0))
	x.requireOpen(st, x.at(1))
	requireTime(t, retry, st.Open[0].RetryAt, "OpenSlot.RetryAt of the per-slot failure")

	// Skipped and missed slots under per-slot fences move Last too.
	require.NoError(t, x.ledger.Skip(ctx, x.slot(4), perSlot(3), ledger.StatusSkipped, "overlap", x.now(4, 0)))
	requireTime(t, x.at(4), x.state("", time.Time{}).Last, "after a per-slot Skip of slot 4")
	require.NoError(t, x.ledger.Skip(ctx, x.slot(3), perSlot(3), ledger.StatusMissed, "downtime", x.now(4, time.Second)))
	requireTime(t, x.at(4), x.state("", time.Time{}).Last, "after a per-slot Skip of the earlier slot 3")
	require.NoError(t, x.ledger.Skip(ctx, x.slot(6), perSlot(3), ledger.StatusMissed, "downtime", x.now(6, 0)))
	st = x.state("", x.at(0))
	requireTime(t, x.at(6), st.Last, "after a per-slot Skip (missed) of slot 6")
	x.requireOpen(st, x.at(1))
	requireTime(t, horizon, st.Horizon, "State.Horizon, later")

	// The retry, by the same lease, is attempt 2 of slot 1.
	require.Equal(t, 2, x.begin(x.slot(1), a, 3, retry))
	x.succeed(x.slot(1), a, 2, retry.Add(time.Second))
	x.requireOpen(x.state("", x.at(0)))
}

// Per-slot holders of one (job, partition) race: each begins, heartbeats
// and finishes a slot of its own, all at once. Their tokens increase with
// the slot, so under the pair's fence all but the last would be refused;
// under per-slot fences every write is accepted.
func testPerSlotConcurrent(t *testing.T, x *fixture) {
	const racers = 12
	ctx := t.Context()
	errs := make([]error, racers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range racers {
		s, f := x.slot(i), perSlot(i+1)
		wg.Go(func() {
			<-start
			n, _, err := x.ledger.Begin(ctx, s, f, 3, x.now(i, time.Second))
			if err == nil {
				err = x.ledger.Heartbeat(ctx, s, f, n, x.now(i, 2*time.Second))
			}
			if err == nil {
				err = x.ledger.Finish(ctx, s, f, n, ledger.Outcome{Status: ledger.StatusSucceeded}, x.now(i, 3*time.Second))
			}
			errs[i] = err
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "per-slot holder %d of slot %d", i+1, i)
		rec := x.get(x.slot(i))
		require.Equal(t, ledger.StatusSucceeded, rec.Status, "slot %d", i)
		require.Len(t, rec.Attempts, 1, "slot %d", i)
		require.Equal(t, perSlot(i+1).Token, rec.Attempts[0].Token, "slot %d's token", i)
	}
	st := x.state("", x.at(0))
	requireTime(t, x.at(racers-1), st.Last, "State.Last after the race")
	x.requireOpen(st)
}
