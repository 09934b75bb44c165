package ledgertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// stateCases cover State: Open, Last, Horizon and Paused.
var stateCases = []testCase{
	{"OpenListsSlotsNeedingAnAttemptOldestFirst", testOpenLists},
	{"RunningSlotOfHolderThatLostTheLeaseIsOpen", testLostHoldersSlotIsOpen},
	{"LastIsLatestSlotBegunSkippedOrMissed", testLast},
	{"HorizonIsTheCallersNowOnFirstUseAndStable", testHorizon},
	{"PauseIsPerJobAcrossPartitions", testPause},
}

// One slot in each state; Open holds exactly the pending ones (whatever
// since says: an operator asked for them), the running ones (whatever since
// says), and the failures with a retry whose slot or retry time is at or
// after since (slot 0's retry comes due after since: a requested slot's
// retries run whatever its age), oldest first. A lease holder reads State
// only between its own attempts, so a running slot it sees is abandoned
// (slot 4).
func testOpenLists(t *testing.T, x *fixture) {
	ctx := t.Context()
	h := holder(1)
	begin := func(i int) int { return x.begin(x.slot(i), h, 3, x.now(i, time.Second)) }

	// Slot -1: pending, before since.
	require.NoError(t, x.ledger.Request(ctx, x.slot(-1), "backfill", x.now(-1, 0)))
	// Slot 0: failed with a retry, before since; the retry at(1) + 2.25 s.
	x.fail(x.slot(0), h, begin(0), x.now(0, 2*time.Second))
	retry0 := x.now(0, 2*time.Second).Add(time.Minute)
	// Slot 1: pending, by a Request of a slot never begun.
	require.NoError(t, x.ledger.Request(ctx, x.slot(1), "backfill", x.now(1, 0)))
	// Slot 2: failed with a retry.
	retry2 := x.now(2, 90*time.Second)
	x.finish(x.slot(2), h, begin(2), ledger.Outcome{
		Status: ledger.StatusFailed, Class: ledger.ClassTimeout, Error: "timeout", RetryAt: retry2,
	}, x.now(2, 30*time.Second))
	// Slot 3: succeeded.
	x.succeed(x.slot(3), h, begin(3), x.now(3, 2*time.Second))
	// Slot 4: running (seen by the next holder: abandoned).
	begin(4)
	// Slots 5 and 6: skipped and missed.
	require.NoError(t, x.ledger.Skip(ctx, x.slot(5), h, ledger.StatusSkipped, "overlap", x.now(5, 0)))
	require.NoError(t, x.ledger.Skip(ctx, x.slot(6), h, ledger.StatusMissed, "downtime", x.now(6, 0)))
	// Slot 7: failed for good.
	x.finish(x.slot(7), h, begin(7), ledger.Outcome{
		Status: ledger.StatusFailed, Class: ledger.ClassPanic, Error: "panic",
	}, x.now(7, 2*time.Second))
	// Slot 8: failed with a retry, the latest.
	retry8 := x.now(8, 10*time.Second)
	x.finish(x.slot(8), h, begin(8), ledger.Outcome{
		Status: ledger.StatusFailed, Class: ledger.ClassRetryable, Error: "again", RetryAt: retry8,
	}, x.now(8, 5*time.Second))

	st := x.state("", x.at(1)) // since is inclusive
	x.requireOpen(st, x.at(-1), x.at(0), x.at(1), x.at(2), x.at(4), x.at(8))
	requireTime(t, time.Time{}, st.Open[0].RetryAt, "pending slot's RetryAt (zero: now)")
	requireTime(t, retry0, st.Open[1].RetryAt, "failed slot's RetryAt, the slot before since")
	requireTime(t, time.Time{}, st.Open[2].RetryAt, "pending slot's RetryAt (zero: now)")
	requireTime(t, retry2, st.Open[3].RetryAt, "failed slot's RetryAt")
	requireTime(t, time.Time{}, st.Open[4].RetryAt, "running slot's RetryAt (zero: now)")
	requireTime(t, retry8, st.Open[5].RetryAt, "failed slot's RetryAt")

	x.requireOpen(x.state("", x.at(0)), x.at(-1), x.at(0), x.at(1), x.at(2), x.at(4), x.at(8))
	x.requireOpen(x.state("", retry0), x.at(-1), x.at(0), x.at(1), x.at(2), x.at(4), x.at(8))
	// Past slot 0's retry time, its retry is older than since: not run.
	x.requireOpen(x.state("", x.at(1).Add(3*time.Second)), x.at(-1), x.at(1), x.at(2), x.at(4), x.at(8))
	// A running slot is open whatever since says: left out, the slot of a
	// holder that crashed stayed running for good once the window passed
	// it (no Request reaches a running slot).
	x.requireOpen(x.state("", x.at(9)), x.at(-1), x.at(1), x.at(4))
}

// "A running attempt whose holder lost the job lease is abandoned", and
// Open lists abandoned slots: once a newer holder touched the ledger, the
// slot the old holder was running must show up for the next claim, or it
// is lost (Last is past it, so no gap detection finds it either).
func testLostHoldersSlotIsOpen(t *testing.T, x *fixture) {
	a, b := holder(1), holder(2)
	x.begin(x.slot(1), a, 3, x.now(1, time.Second))
	x.begin(x.slot(2), b, 3, x.now(2, time.Second))

	x.succeed(x.slot(2), b, 1, x.now(2, 2*time.Second))

	st := x.state("", x.at(0))
	x.requireOpen(st, x.at(1))
	requireTime(t, time.Time{}, st.Open[0].RetryAt, "abandoned slot's RetryAt (zero: now)")
	x.requireOpen(x.state("", x.at(3)), x.at(1)) // however old

	require.Equal(t, 2, x.begin(x.slot(1), b, 3, x.now(2, 5*time.Second)))
	x.succeed(x.slot(1), b, 2, x.now(2, 6*time.Second))
	x.requireOpen(x.state("", x.at(0)))
}

func testLast(t *testing.T, x *fixture) {
	ctx := t.Context()
	h := holder(1)
	requireTime(t, time.Time{}, x.state("", time.Time{}).Last, "State.Last of an unused job")

	x.begin(x.slot(2), h, 3, x.now(2, 0))
	requireTime(t, x.at(2), x.state("", time.Time{}).Last, "after Begin of slot 2")

	require.NoError(t, x.ledger.Skip(ctx, x.slot(1), h, ledger.StatusSkipped, "overlap", x.now(2, time.Second)))
	requireTime(t, x.at(2), x.state("", time.Time{}).Last, "after Skip of the earlier slot 1")

	require.NoError(t, x.ledger.Skip(ctx, x.slot(3), h, ledger.StatusSkipped, "latest-only", x.now(3, 0)))
	requireTime(t, x.at(3), x.state("", time.Time{}).Last, "after Skip of slot 3")

	require.NoError(t, x.ledger.Skip(ctx, x.slot(4), h, ledger.StatusMissed, "manual", x.now(4, 0)))
	requireTime(t, x.at(4), x.state("", time.Time{}).Last, "after Skip (missed) of slot 4")

	// A Request neither begins nor skips a slot.
	require.NoError(t, x.ledger.Request(ctx, x.slot(6), "trigger", x.now(4, time.Second)))
	requireTime(t, x.at(4), x.state("", time.Time{}).Last, "after Request of slot 6")

	x.begin(x.slot(0), h, 3, x.now(4, 2*time.Second))
	requireTime(t, x.at(4), x.state("", time.Time{}).Last, "after Begin of the earlier slot 0")
}

func testHorizon(t *testing.T, x *fixture) {
	ctx := t.Context()
	h := holder(1)

	// First use by State: the horizon is the caller's now (a store may
	// truncate it to the second), never the store's own clock.
	first, err := x.ledger.State(ctx, x.job, "", time.Time{}, x.now(0, 0))
	require.NoError(t, err)
	require.False(t, first.Horizon.Before(x.at(0)) || first.Horizon.After(x.now(0, 0)),
		"State.Horizon %v after the first State at %v: not the caller's now", first.Horizon, x.now(0, 0))
	n := x.begin(x.slot(0), h, 3, x.now(0, 0))
	x.succeed(x.slot(0), h, n, x.now(0, time.Second))
	require.NoError(t, x.ledger.Skip(ctx, x.slot(1), h, ledger.StatusSkipped, "overlap", x.now(1, 0)))
	require.NoError(t, x.ledger.Request(ctx, x.slot(0), "rerun", x.now(1, time.Second)))
	for range 2 {
		requireTime(t, first.Horizon, x.state("", time.Time{}).Horizon, "State.Horizon, later")
	}

	// First use by Begin, in another partition.
	x.begin(x.slotIn("p", 0), h, 3, x.now(0, 0))
	other, err := x.ledger.State(ctx, x.job, "p", time.Time{}, x.now(0, time.Second))
	require.NoError(t, err)
	require.False(t, other.Horizon.IsZero(), "State.Horizon after a first Begin")
	require.False(t, other.Horizon.After(x.now(0, time.Second)), "State.Horizon %v: not from the callers' now", other.Horizon)
	require.False(t, other.Horizon.Before(x.at(0)), "State.Horizon %v: not from the callers' now", other.Horizon)
	x.succeed(x.slotIn("p", 0), h, 1, x.now(0, time.Second))
	requireTime(t, other.Horizon, x.state("p", time.Time{}).Horizon, "State.Horizon, later")
}

func testPause(t *testing.T, x *fixture) {
	ctx := t.Context()
	other := uniqueName(t, "ledgertest-pause-other")
	paused := func(job, partition string) bool {
		st, err := x.ledger.State(ctx, job, partition, time.Time{}, time.Now())
		require.NoError(t, err)
		return st.Paused
	}
	require.False(t, paused(x.job, ""), "a new job is not paused")

	require.NoError(t, x.ledger.SetPaused(ctx, x.job, true))
	require.True(t, paused(x.job, ""))
	require.True(t, paused(x.job, "eu"), "pause covers every partition")
	require.True(t, paused(x.job, "never-used"), "pause covers partitions not seen yet")
	require.False(t, paused(other, ""), "another job")

	require.NoError(t, x.ledger.SetPaused(ctx, x.job, true), "pausing twice")
	require.True(t, paused(x.job, "eu"))

	require.NoError(t, x.ledger.SetPaused(ctx, x.job, false))
	require.False(t, paused(x.job, ""))
	require.False(t, paused(x.job, "eu"))
}
