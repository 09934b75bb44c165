package ledgertest

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// pruneCases check ledger.Pruner on a ledger that implements it (skipped
// otherwise).
var pruneCases = []testCase{
	{"PrunerDeletesOnlyDoneSlotsAndKeepsState", testPrune},
	{"PruneRefusesACutoffOfSlotsThatMayStillRun", testPruneRefusesRecentCutoff},
}

// testPruneRefusesRecentCutoff: Prune and PrunePreview refuse a cutoff in
// the future, or within ledger.PruneMargin of now, with a
// *ledger.PruneCutoffError naming the cutoff, and change nothing: the
// pair's State.Pruned does not move, a done slot before the cutoff keeps
// its record, and an OverlapAllow slot (its own slot fence) that comes
// due after the refusal begins and succeeds.
func testPruneRefusesRecentCutoff(t *testing.T, x *fixture) {
	p := implements[ledger.Pruner](t, x)
	ctx := t.Context()
	h := holder(1)
	done := x.slot(0) // base is an hour ahead of now: these slots are still to come
	n := x.begin(done, perSlot(1), 3, x.now(0, 0))
	x.succeed(done, perSlot(1), n, x.now(0, time.Second))

	future := time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, cutoff := range []time.Time{future, x.at(2), time.Now().Add(-time.Second), time.Now().Add(-ledger.PruneMargin + time.Minute)} {
		_, err := p.Prune(ctx, cutoff)
		requireCutoffRefused(t, err, cutoff, "Prune")
		if pp, ok := x.raw.(ledger.PrunePreviewer); ok {
			_, _, err := pp.PrunePreview(ctx, cutoff, 10)
			requireCutoffRefused(t, err, cutoff, "PrunePreview")
		}
	}
	// (A shared store's other cases may raise it to their own cutoff, far
	// before this one's slots.)
	pruned := x.state("", x.at(-10)).Pruned
	require.True(t, pruned.Before(x.at(0)), "State.Pruned %v not raised to a refused cutoff", pruned)
	require.Equal(t, ledger.StatusSucceeded, x.get(done).Status, "the done slot's record is kept")

	// The job goes on: its next slots begin, each under its own fence,
	// and under the unit's.
	for i := 1; i <= 2; i++ {
		f := perSlot(1 + i)
		n := x.begin(x.slot(i), f, 3, x.now(i, 0))
		require.Equal(t, 1, n, "slot %d begins at attempt 1 after the refused Prune", i)
		x.succeed(x.slot(i), f, n, x.now(i, time.Second))
	}
	require.Equal(t, 1, x.begin(x.slot(3), h, 3, x.now(3, 0)), "a unit-fenced slot begins too")
}

// requireCutoffRefused checks that err is the refusal of cutoff: a
// *ledger.PruneCutoffError (ledger.ErrPruneCutoff) whose limit is at
// least PruneMargin before the cutoff's check time and before cutoff.
func requireCutoffRefused(t *testing.T, err error, cutoff time.Time, what string) {
	t.Helper()
	require.ErrorIs(t, err, ledger.ErrPruneCutoff, "%s of %v", what, cutoff)
	var ce *ledger.PruneCutoffError
	require.ErrorAs(t, err, &ce, "%s of %v", what, cutoff)
	require.True(t, ce.Before.Equal(cutoff), "%s: Before %v, want %v", what, ce.Before, cutoff)
	require.True(t, ce.Limit.Before(cutoff), "%s: Limit %v before the cutoff %v", what, ce.Limit, cutoff)
	require.Equal(t, ledger.PruneMargin, ce.Now.Sub(ce.Limit), "%s: Limit is the store's now minus PruneMargin", what)
	require.WithinDuration(t, time.Now(), ce.Now, time.Minute, "%s: the store's clock", what)
	require.ErrorContains(t, err, cutoff.UTC().Format(time.RFC3339), "%s: the message names the cutoff", what)
	require.ErrorContains(t, err, ce.Limit.UTC().Format(time.RFC3339), "%s: and the limit", what)
}

// pruneBase is where the Prune check's slots start: far before the slots
// of every other case, so that its Prune, which works on the whole store,
// deletes none of theirs when they share a ledger. A store shared with
// other data loses its done records of slots before 2000-01-01T00:30Z,
// and the State.Pruned of every pair it holds then rises to that cutoff
// (the StatesReader case allows for it).
var pruneBase = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// testPrune is the Prune contract (ledger.Pruner): on slots of every
// state before the cutoff and after it, in two partitions, Prune deletes
// exactly the done slots before the cutoff that are not their pair's
// State.Last; Get finds none of them, List skips them; every pair's State
// is the same after as before; a retryable slot resumes at its next
// attempt and a later slot begins at attempt 1, as without the Prune.
func testPrune(t *testing.T, x *fixture) {
	p := implements[ledger.Pruner](t, x)
	y := *x
	y.base = pruneBase
	x = &y
	ctx := t.Context()
	h := holder(1)
	run := func(s ledger.Slot, max int, o ledger.Outcome) {
		t.Helper()
		n := x.begin(s, h, max, x.now(0, 0))
		x.finish(s, h, n, o, x.now(0, time.Second))
	}
	succeeded := ledger.Outcome{Status: ledger.StatusSucceeded}
	final := ledger.Outcome{Status: ledger.StatusFailed, Class: ledger.ClassPermanent, Error: "final"}
	retry := ledger.Outcome{Status: ledger.StatusFailed, Class: ledger.ClassRetryable, Error: "again", RetryAt: x.at(40)}

	state := func(partition string, now time.Time) ledger.State {
		t.Helper()
		st, err := x.ledger.State(ctx, x.job, partition, x.at(-10), now)
		require.NoError(t, err)
		return st
	}
	// Both horizons start now, before the slots: a Prune that reset one
	// would show in a State read later.
	state("", x.now(-1, 0))
	state("p", x.now(-1, 0))

	// Partition "": slots 0-9 before the cutoff (slot 30), 31 after it.
	run(x.slot(0), 3, succeeded)
	run(x.slot(1), 3, final)
	run(x.slot(2), 3, retry) // retryable: kept
	require.NoError(t, x.ledger.Skip(ctx, x.slot(3), h, ledger.StatusSkipped, "overlap", x.now(3, 0)))
	require.NoError(t, x.ledger.Skip(ctx, x.slot(4), h, ledger.StatusMissed, "manual", x.now(4, 0)))
	x.begin(x.slot(5), h, 3, x.now(5, 0)) // running: kept
	require.NoError(t, x.ledger.Request(ctx, x.slot(6), "backfill", x.now(6, 0)))
	run(x.slot(7), 3, succeeded)
	require.NoError(t, x.ledger.Request(ctx, x.slot(7), "retry", x.now(7, 0))) // pending again: kept
	run(x.slot(8), 1, retry)
	x.requireDone(x.slot(8), h, 1, x.now(8, 0)) // budget spent: final
	// OverlapAllow's slots, each under its own slot fence: slot 10 done
	// (pruned, with its fence: closed), slot 11 running (kept).
	n10 := x.begin(x.slot(10), perSlot(5), 3, x.now(10, 0))
	x.finish(x.slot(10), perSlot(5), n10, succeeded, x.now(10, time.Second))
	n11 := x.begin(x.slot(11), perSlot(6), 3, x.now(11, 0))
	run(x.slot(31), 3, succeeded) // after the cutoff: kept, and State.Last
	// Partition "p": its State.Last (slot 9) is before the cutoff: kept.
	run(x.slotIn("p", 1), 3, succeeded)
	run(x.slotIn("p", 9), 3, succeeded)

	pruned := []ledger.Slot{x.slot(0), x.slot(1), x.slot(3), x.slot(4), x.slot(8), x.slot(10), x.slotIn("p", 1)}
	kept := []ledger.Slot{x.slot(2), x.slot(5), x.slot(6), x.slot(7), x.slot(11), x.slot(31), x.slotIn("p", 9)}
	keptRecs := map[ledger.Slot]ledger.Record{}
	for _, s := range kept {
		keptRecs[s] = x.get(s)
	}
	before := map[string]ledger.State{"": state("", x.now(50, 0)), "p": state("p", x.now(50, 0))}

	// A dry run (ledger.PrunePreviewer) lists the done slots of this job
	// that Prune deletes below, and deletes nothing.
	if pp, ok := x.raw.(ledger.PrunePreviewer); ok {
		listed, total, err := pp.PrunePreview(ctx, x.at(30), 100000)
		require.NoError(t, err)
		require.GreaterOrEqual(t, total, int64(len(pruned)))
		var ours []ledger.Slot
		for _, s := range listed {
			if s.Job == x.job {
				ours = append(ours, ledger.Slot{Job: s.Job, At: s.At.UTC(), Partition: s.Partition})
			}
		}
		require.ElementsMatch(t, pruned, ours, "PrunePreview lists what Prune deletes")
		for _, s := range append(slices.Clone(pruned), kept...) {
			x.get(s) // still there
		}
		few, total2, err := pp.PrunePreview(ctx, x.at(30), 2)
		require.NoError(t, err)
		require.Len(t, few, 2, "at most limit")
		require.Equal(t, total, total2)
	}

	n, err := p.Prune(ctx, x.at(30))
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, int64(len(pruned)), "Prune's count covers the %d done slots of this job", len(pruned))
	for _, s := range pruned {
		x.requireAbsent(s)
	}
	for _, s := range kept {
		requireSameRecord(t, keptRecs[s], x.get(s), "kept "+x.label(s.At)+" in partition "+s.Partition)
	}
	for part, st := range before {
		// The same State, but for Pruned, the cutoff: the records of done
		// slots before it may be gone (a plan behind Last leaves them).
		require.True(t, st.Pruned.IsZero(), "Pruned before the first Prune")
		st.Pruned = x.at(30)
		requireSameState(t, st, state(part, x.now(51, 0)), "State of partition "+part+" after Prune")
	}
	// An earlier cutoff never lowers it.
	_, err = p.Prune(ctx, x.at(20))
	require.NoError(t, err)
	require.True(t, x.at(30).Equal(state("", x.now(52, 0)).Pruned), "Pruned stays at the latest cutoff")
	recs, err := x.ledger.List(ctx, x.job, "", x.at(-10), x.at(60), 100)
	require.NoError(t, err)
	var listed []string
	for _, r := range recs {
		listed = append(listed, x.label(r.Slot.At))
	}
	require.Equal(t, []string{"slot 31", "slot 11", "slot 7", "slot 6", "slot 5", "slot 2"}, listed, "List after Prune")

	// The pruned slot's own fence went with it, and the slot is closed:
	// neither its stale holder nor any other token may write it again
	// (a Request may record it pending, but nothing begins). The running
	// slot before the cutoff keeps its fence and goes on.
	for _, f := range []ledger.Fence{perSlot(5), perSlot(9)} {
		_, _, err := x.ledger.Begin(ctx, x.slot(10), f, 3, x.now(53, 0))
		requireStale(t, err, f.Token, 0, "a Begin of a pruned slot under its slot scope")
		err = x.ledger.Finish(ctx, x.slot(10), f, n10, succeeded, x.now(53, 0))
		requireStale(t, err, f.Token, 0, "a Finish of a pruned slot under its slot scope")
		err = x.ledger.Skip(ctx, x.slot(10), f, ledger.StatusSkipped, "again", x.now(53, 0))
		requireStale(t, err, f.Token, 0, "a Skip of a pruned slot under its slot scope")
	}
	x.requireAbsent(x.slot(10))
	require.NoError(t, x.ledger.Heartbeat(ctx, x.slot(11), perSlot(6), n11, x.now(53, 0)))
	x.succeed(x.slot(11), perSlot(6), n11, x.now(53, time.Second))

	// Catch-up goes on as before: the retryable slot's next attempt is its
	// second, and the slot after State.Last starts at attempt 1.
	require.Equal(t, 2, x.begin(x.slot(2), h, 3, x.at(40)), "retryable slot 2 resumes")
	require.Equal(t, 1, x.begin(x.slot(32), h, 3, x.now(32, 0)), "the next slot begins")
}

// requireSameState compares two States at millisecond precision.
func requireSameState(t *testing.T, want, got ledger.State, what string) {
	t.Helper()
	norm := func(st ledger.State) ledger.State {
		st.Last, st.Horizon, st.Pruned = ms(st.Last), ms(st.Horizon), ms(st.Pruned)
		open := make([]ledger.OpenSlot, len(st.Open))
		for i, o := range st.Open {
			open[i] = ledger.OpenSlot{At: ms(o.At), RetryAt: ms(o.RetryAt)}
		}
		st.Open = open
		return st
	}
	require.Equal(t, norm(want), norm(got), "%s", what)
}
