package ledgertest

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// optionalCases check the optional ledger interfaces, on a ledger that
// implements them (the subtest is skipped otherwise): they are part of the
// contract for every ledger that offers them.
var optionalCases = []testCase{
	{"CancelerNamesOnlyALaterSlot", testCanceler},
	{"ClearBeginnerBeginsOnlyWhenNothingElseIsDue", testClearBeginner},
	{"ClearBeginnerSeesAnOlderSlotsRetryDueWithinSince", testClearBeginnerOldRetry},
	{"ClearBeginnerIsNotClearWhileAnOlderSlotRunsAbandoned", testClearBeginnerOldRun},
	{"ClearBeginnerSeesAnAbandonedRunBesideOldRetries", testClearBeginnerOldRunBesideRetries},
	{"PauseReaderFollowsSetPaused", testPauseReader},
	{"StatesReaderAnswersAsState", testStatesReader},
}

// StatesReader: States answers each request, in order, as State would at
// the same now: open slots (running, retrying, pending), last, horizon
// (started by the call for a new pair) and the pause flag.
func testStatesReader(t *testing.T, x *fixture) {
	sr := implements[ledger.StatesReader](t, x)
	ctx := t.Context()
	h := holder(1)
	x.begin(x.slot(0), h, 3, x.now(0, 0)) // running
	x.fail(x.slot(1), h, x.begin(x.slot(1), h, 3, x.now(1, 0)), x.now(1, 1))
	require.NoError(t, x.ledger.Request(ctx, x.slotIn("b", 2), "test", x.now(2, 0)))
	paused := x.job + "-paused"
	require.NoError(t, x.ledger.SetPaused(ctx, paused, true))
	reqs := []ledger.StateRequest{
		{Job: x.job, Partition: "", Since: x.at(0)},
		{Job: x.job, Partition: "b", Since: x.at(0)},
		{Job: x.job, Partition: "new", Since: x.at(0)},
		{Job: x.job, Partition: "", Since: x.at(3)}, // after both slots and the retry: the running one is still listed
		{Job: paused, Partition: "", Since: x.at(0)},
	}
	now := x.now(3, 0)
	got, err := sr.States(ctx, reqs, now)
	require.NoError(t, err)
	require.Len(t, got, len(reqs))
	for i, q := range reqs {
		want, err := x.ledger.State(ctx, q.Job, q.Partition, q.Since, now)
		require.NoError(t, err)
		// The Prune case, on a ledger it shares with this one
		// (pgledger's TestConformanceSharedSchema), raises the Pruned of
		// every pair that exists when it runs, this case's too: between
		// the answer and the State read after it, the answer then holds
		// the earlier Pruned (never a later one: Pruned only rises). The
		// batch and the State are read again, a few times at most (the
		// Prune case raises the cutoff once), and must then agree.
		for range 3 {
			if !got[i].Pruned.Before(want.Pruned) || !sameButPruned(want, got[i]) {
				break
			}
			again, err := sr.States(ctx, reqs, now)
			require.NoError(t, err)
			require.Len(t, again, len(reqs))
			got[i] = again[i]
			want, err = x.ledger.State(ctx, q.Job, q.Partition, q.Since, now)
			require.NoError(t, err)
		}
		require.Equal(t, want, got[i], "request %d (%s %q)", i, q.Job, q.Partition)
	}
	require.Len(t, got[0].Open, 2, "the running and the retrying slot")
	require.True(t, got[0].Open[1].RetryAt.Equal(x.now(1, 1).Add(time.Minute).Truncate(time.Millisecond)),
		"slot 1 retries a minute after its failure: %v", got[0].Open[1].RetryAt)
	require.Equal(t, []ledger.OpenSlot{{At: x.at(2)}}, got[1].Open, "the pending request")
	require.Empty(t, got[2].Open)
	require.WithinDuration(t, now, got[2].Horizon, time.Second, "a new pair's horizon starts at now")
	require.Equal(t, []ledger.OpenSlot{{At: x.at(0)}}, got[3].Open, "since leaves out slot 1's retry, not the running slot 0")
	require.True(t, got[4].Paused)
	require.False(t, got[0].Paused)
	none, err := sr.States(ctx, nil, now)
	require.NoError(t, err)
	require.Empty(t, none)
}

// PauseReader: Paused follows SetPaused, per job, and starts no horizon.
func testPauseReader(t *testing.T, x *fixture) {
	pr := implements[ledger.PauseReader](t, x)
	ctx := t.Context()
	paused, err := pr.Paused(ctx, x.job)
	require.NoError(t, err)
	require.False(t, paused, "a new job is not paused")
	require.NoError(t, x.ledger.SetPaused(ctx, x.job, true))
	paused, err = pr.Paused(ctx, x.job)
	require.NoError(t, err)
	require.True(t, paused)
	paused, err = pr.Paused(ctx, x.job+"-other")
	require.NoError(t, err)
	require.False(t, paused, "the flag is per job")
	require.NoError(t, x.ledger.SetPaused(ctx, x.job, false))
	paused, err = pr.Paused(ctx, x.job)
	require.NoError(t, err)
	require.False(t, paused)
	st, err := x.ledger.State(ctx, x.job, "", x.at(0), x.now(5, 0))
	require.NoError(t, err)
	require.WithinDuration(t, x.at(5), st.Horizon, time.Second, "Paused started no horizon: State's call did")
}

// Canceler: a request for the running slot itself cancels nothing (a
// replica that lost the race for that slot asks for it); one for a later
// slot makes the running attempt's Heartbeat return ErrCancelRequested.
func testCanceler(t *testing.T, x *fixture) {
	c := implements[ledger.Canceler](t, x)
	ctx := t.Context()
	h := holder(1)
	n := x.begin(x.slot(0), h, 3, x.now(0, 0))
	require.NoError(t, c.RequestCancel(ctx, x.job, "", x.at(0)))
	require.NoError(t, x.ledger.Heartbeat(ctx, x.slot(0), h, n, x.now(0, 1)), "the slot itself cancels nothing")
	require.NoError(t, c.RequestCancel(ctx, x.job, "other", x.at(1)))
	require.NoError(t, x.ledger.Heartbeat(ctx, x.slot(0), h, n, x.now(0, 2)), "another partition cancels nothing")
	require.NoError(t, c.RequestCancel(ctx, x.job, "", x.at(1)))
	require.ErrorIs(t, x.ledger.Heartbeat(ctx, x.slot(0), h, n, x.now(0, 3)), ledger.ErrCancelRequested)
}

// ClearBeginner: BeginIfClear begins a slot as Begin does when nothing
// else is due for its pair, and otherwise changes nothing (Clear false).
func testClearBeginner(t *testing.T, x *fixture) {
	cb := implements[ledger.ClearBeginner](t, x)
	ctx := t.Context()
	since := x.at(-60)
	req := func(i int, f ledger.Fence, prev int) ledger.BeginRequest {
		return ledger.BeginRequest{Slot: x.slot(i), Fence: fill(x.slot(i), f), MaxAttempts: 3, Prev: x.at(prev), Since: since}
	}
	one := func(r ledger.BeginRequest, i int) ledger.BeginResult {
		t.Helper()
		res := cb.BeginIfClear(ctx, []ledger.BeginRequest{r}, x.now(i, 0))
		require.Len(t, res, 1)
		return res[0]
	}
	a, b := holder(1), holder(2)
	a.Holder = "replica-a"

	// A pair the ledger never saw, asked with Seen (the caller saw slot 0
	// recorded: the store lost it): not clear, nothing begun.
	lost := req(1, a, 0)
	lost.Seen = x.at(0)
	require.False(t, one(lost, 1).Clear, "a last slot missing where the caller saw one")
	x.requireAbsent(x.slot(1))

	// A pair the ledger never saw: clear, attempt 1 of 3, with a's label.
	res := one(req(1, a, 0), 1)
	require.True(t, res.Clear)
	require.NoError(t, res.Err)
	require.Equal(t, []int{1, 2}, []int{res.Attempt, res.Left})
	require.Equal(t, ledger.StatusRunning, x.get(x.slot(1)).Status)
	require.Equal(t, "replica-a", x.get(x.slot(1)).Attempts[0].Holder, "BeginIfClear records the holder label")

	// The next slot while slot 1 still runs under a holder that lost the
	// lease: slot 1 is open, so not clear, and nothing changes.
	res = one(req(2, b, 1), 2)
	require.False(t, res.Clear)
	x.requireAbsent(x.slot(2))

	// Slot 1 succeeds: slot 2 is clear.
	x.succeed(x.slot(1), a, 1, x.now(1, 1))
	res = one(req(2, a, 1), 2)
	require.True(t, res.Clear)
	require.Equal(t, 1, res.Attempt)
	x.succeed(x.slot(2), a, 1, x.now(2, 1))

	// Seen after the ledger's last slot (2): it went back, not clear.
	back := req(3, a, 2)
	back.Seen = x.at(3)
	require.False(t, one(back, 3).Clear, "the last slot went back behind Seen")
	x.requireAbsent(x.slot(3))

	// A gap: slot 3 was never begun, so slot 4 is not clear.
	require.False(t, one(req(4, a, 3), 4).Clear, "slot 3 went unseen")

	// A slot already done: clear, ErrSlotDone.
	res = one(req(2, a, 1), 2)
	require.True(t, res.Clear)
	require.ErrorIs(t, res.Err, ledger.ErrSlotDone)

	// A stale token: clear, *fence.StaleTokenError, nothing begun.
	res = one(req(3, ledger.Fence{Scope: unitMark, Token: TokenBase, Owner: "old"}, 2), 3)
	require.True(t, res.Clear)
	var stale *fence.StaleTokenError
	require.ErrorAs(t, res.Err, &stale)
	x.requireAbsent(x.slot(3))

	// Paused: not clear.
	require.NoError(t, x.ledger.SetPaused(ctx, x.job, true))
	require.False(t, one(req(3, a, 2), 3).Clear, "paused")
	require.NoError(t, x.ledger.SetPaused(ctx, x.job, false))

	// A pending slot (an operator's request): not clear.
	require.NoError(t, x.ledger.Request(ctx, x.slot(1), "again", x.now(3, 0)))
	require.False(t, one(req(3, a, 2), 3).Clear, "slot 1 pending")
}

// ClearBeginner: a slot before since whose retry is due at or after since
// (a backfilled slot older than the catch-up window) is listed by State,
// so it is due: BeginIfClear of a later scheduled slot is not clear until
// it ran (the fast path would otherwise leave it to a wake-up that a
// replica's restart loses).
func testClearBeginnerOldRetry(t *testing.T, x *fixture) {
	cb := implements[ledger.ClearBeginner](t, x)
	ctx := t.Context()
	a := holder(1)
	since := x.at(2)
	// Slot 0 fails late, its retry at(3) + 0.25 s: after since.
	x.fail(x.slot(0), a, x.begin(x.slot(0), a, 3, x.now(0, time.Second)), x.now(2, 0))
	x.succeed(x.slot(1), a, x.begin(x.slot(1), a, 3, x.now(1, time.Second)), x.now(1, 2*time.Second))
	x.requireOpen(x.state("", since), x.at(0))
	req := ledger.BeginRequest{Slot: x.slot(2), Fence: fill(x.slot(2), a), MaxAttempts: 3, Prev: x.at(1), Since: since}
	res := cb.BeginIfClear(ctx, []ledger.BeginRequest{req}, x.now(2, time.Second))
	require.Len(t, res, 1)
	require.False(t, res[0].Clear, "slot 0's retry is due within since")
	x.requireAbsent(x.slot(2))

	require.Equal(t, 2, x.begin(x.slot(0), a, 3, x.now(3, time.Second)))
	x.succeed(x.slot(0), a, 2, x.now(3, 2*time.Second))
	res = cb.BeginIfClear(ctx, []ledger.BeginRequest{req}, x.now(3, 3*time.Second))
	require.True(t, res[0].Clear, "slot 0 done: clear")
	require.NoError(t, res[0].Err)
	require.Equal(t, 1, res[0].Attempt)
}

// BeginIfClear of a slot while an older slot is still running under a
// holder that lost the lease (it crashed: this request's holder has the
// lease now) is not clear, however old that slot is, so that the plan
// takes it over (State lists it): slot 0 begun clear by a (a hot run, in
// the Redis ledger), slot 1 begun by Begin; b's requests come after
// since passed both (c and d for slot 1: a later lease's holders). It
// left them running for good once the window passed
// them (a fresh user's trial: a killed replica's slot).
func testClearBeginnerOldRun(t *testing.T, x *fixture) {
	cb := implements[ledger.ClearBeginner](t, x)
	ctx := t.Context()
	a, b := holder(1), holder(2)
	// prev is the schedule's fire before slot i: the last one begun, so
	// that no gap between them makes the request unclear.
	clear := func(i int, h ledger.Fence, prev, since, now time.Time) ledger.BeginResult {
		t.Helper()
		res := cb.BeginIfClear(ctx, []ledger.BeginRequest{{Slot: x.slot(i), Fence: fill(x.slot(i), h), MaxAttempts: 3, Prev: prev, Since: since}}, now)
		require.Len(t, res, 1)
		require.NoError(t, res[0].Err)
		return res[0]
	}
	first := clear(0, a, x.at(-1), x.at(0), x.now(0, time.Second))
	require.True(t, first.Clear, "nothing else open: clear")
	require.Equal(t, 1, first.Attempt)

	// a crashed; b's claims come after since passed slot 0.
	res := clear(5, b, x.at(0), x.at(4), x.now(5, time.Second))
	require.False(t, res.Clear, "slot 0 runs abandoned, before since")
	x.requireAbsent(x.slot(5))
	x.requireOpen(x.state("", x.at(4)), x.at(0))
	require.Equal(t, 2, x.begin(x.slot(0), b, 3, x.now(5, 2*time.Second)), "taken over")
	x.succeed(x.slot(0), b, 2, x.now(5, 3*time.Second))

	// Slot 1 begun by Begin (a run hash, no hot run) by c, who crashed.
	c, d := holder(3), holder(4)
	require.Equal(t, 1, x.begin(x.slot(1), c, 3, x.now(6, 0)))
	res = clear(7, d, x.at(1), x.at(6).Add(time.Second), x.now(7, time.Second))
	require.False(t, res.Clear, "slot 1 runs abandoned, before since")
	x.requireOpen(x.state("", x.at(7)), x.at(1))
	require.Equal(t, 2, x.begin(x.slot(1), d, 3, x.now(7, 2*time.Second)), "taken over")
	x.succeed(x.slot(1), d, 2, x.now(7, 3*time.Second))

	res = clear(2, d, x.at(1), x.at(2), x.now(7, 4*time.Second))
	require.True(t, res.Clear, "nothing else open: clear")
	require.Equal(t, 1, res.Attempt)
}

// An abandoned run is seen by BeginIfClear beside failures whose retry
// time passed before since (their open and retry entries are kept: a
// daily job whose retries came due while no replica was up). In partition
// "older" one failure before the run: the first cut looked at the oldest
// open slot before since only, found its retry entry and answered clear (a
// review's finding), and the run stayed running for good on the Redis
// ledger. In partition "newer" 17 failures after it: a bounded look at the
// newest open slots missed it (a second review's finding).
func testClearBeginnerOldRunBesideRetries(t *testing.T, x *fixture) {
	cb := implements[ledger.ClearBeginner](t, x)
	a, b := holder(1), holder(2)
	for _, tc := range []struct {
		partition string
		run       int   // the slot a began and left running
		failures  []int // the slots that failed, their retries past
	}{
		{"older", 1, []int{0}},
		{"newer", 0, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17}},
	} {
		slot := func(i int) ledger.Slot { return x.slotIn(tc.partition, i) }
		for i := 0; i <= 17; i++ {
			switch {
			case i == tc.run:
				require.Equal(t, 1, x.begin(slot(i), a, 3, x.now(i, time.Second)), tc.partition)
			case slices.Contains(tc.failures, i):
				x.fail(slot(i), a, x.begin(slot(i), a, 3, x.now(i, time.Second)), x.now(i, 2*time.Second))
			}
		}
		since := x.at(30)
		x.requireOpen(x.state(tc.partition, since), x.at(tc.run))
		last := slices.Max(append([]int{tc.run}, tc.failures...))
		req := ledger.BeginRequest{Slot: slot(31), Fence: fill(slot(31), b), MaxAttempts: 3, Prev: x.at(last), Since: since}
		res := cb.BeginIfClear(t.Context(), []ledger.BeginRequest{req}, x.now(31, time.Second))
		require.Len(t, res, 1)
		require.NoError(t, res[0].Err)
		require.False(t, res[0].Clear, "%s: slot %d runs abandoned beside old retries", tc.partition, tc.run)
		x.requireAbsent(slot(31))
	}
}

// sameButPruned reports whether a and b are the same State but for
// Pruned.
func sameButPruned(a, b ledger.State) bool {
	a.Pruned, b.Pruned = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}
