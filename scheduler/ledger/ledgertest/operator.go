package ledgertest

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// operatorCases cover Skip (policy) and Request (operators).
var operatorCases = []testCase{
	{"SkipRecordsSkippedWithReason", testSkipSkipped},
	{"SkipRecordsMissedUntilRequest", testSkipMissed},
	{"SkipLeavesBegunSlotAsItIs", testSkipBegun},
	{"RequestReopensWithFreshAttemptBudget", testRequestFreshBudget},
	{"RequestReopensSucceededAndFinalSlots", testRequestReopens},
	{"RequestOfRunningSlotIsRefused", testRequestRunning},
	{"RequestOfUnknownSlotMakesItPending", testRequestUnknown},
}

func testSkipSkipped(t *testing.T, x *fixture) {
	s, h := x.slot(0), holder(1)
	require.NoError(t, x.ledger.Skip(t.Context(), s, h, ledger.StatusSkipped, "overlap: forbid", x.now(0, 0)))

	rec := x.get(s)
	require.Equal(t, ledger.StatusSkipped, rec.Status)
	require.Equal(t, "overlap: forbid", rec.Reason)
	require.Equal(t, 0, rec.Attempt)
	require.Empty(t, rec.Attempts)
	x.requireOpen(x.state("", x.at(-1)))
	x.requireDone(s, h, 3, x.now(0, time.Second))
	x.requireDone(s, holder(2), 3, x.now(0, time.Second))
}

func testSkipMissed(t *testing.T, x *fixture) {
	ctx := t.Context()
	s, h := x.slot(0), holder(1)
	require.NoError(t, x.ledger.Skip(ctx, s, h, ledger.StatusMissed, "missed during downtime", x.now(0, 0)))

	rec := x.get(s)
	require.Equal(t, ledger.StatusMissed, rec.Status)
	require.Equal(t, "missed during downtime", rec.Reason)
	require.Empty(t, rec.Attempts)
	x.requireOpen(x.state("", x.at(-1))) // it awaits an operator
	x.requireDone(s, h, 3, x.now(0, time.Second))

	require.NoError(t, x.ledger.Request(ctx, s, "ops: run the missed settlement", x.now(1, 0)))
	rec = x.get(s)
	require.Equal(t, ledger.StatusPending, rec.Status)
	require.Equal(t, "ops: run the missed settlement", rec.Reason)
	st := x.state("", x.at(-1))
	x.requireOpen(st, x.at(0))
	requireTime(t, time.Time{}, st.Open[0].RetryAt, "pending slot's RetryAt")

	require.Equal(t, 1, x.begin(s, h, 3, x.now(1, time.Second)))
	x.succeed(s, h, 1, x.now(1, 2*time.Second))
	require.Equal(t, ledger.StatusSucceeded, x.get(s).Status)
}

// Skip never overwrites a record: a slot that was begun keeps its run.
func testSkipBegun(t *testing.T, x *fixture) {
	ctx := t.Context()
	h := holder(1)
	running, succeeded := x.slot(0), x.slot(1)
	x.begin(running, h, 3, x.now(0, 0))
	x.succeed(succeeded, h, x.begin(succeeded, h, 3, x.now(1, 0)), x.now(1, time.Second))
	before := []ledger.Record{x.get(running), x.get(succeeded)}

	for i, s := range []ledger.Slot{running, succeeded} {
		for _, status := range []ledger.Status{ledger.StatusSkipped, ledger.StatusMissed} {
			err := x.ledger.Skip(ctx, s, h, status, "overlap", x.now(2, 0))
			// The contract says the slot "is left as it is"; it does not
			// say whether that is an error. Accept nil or ErrSlotDone.
			require.True(t, err == nil || errors.Is(err, ledger.ErrSlotDone), "Skip (%s) of a begun slot: %v", status, err)
			requireSameRecord(t, before[i], x.get(s), "a begun slot after Skip")
		}
	}
}

func testRequestFreshBudget(t *testing.T, x *fixture) {
	ctx := t.Context()
	s, h := x.slot(0), holder(1)
	const maxAttempts = 2
	for n := 1; n <= maxAttempts; n++ {
		require.Equal(t, n, x.begin(s, h, maxAttempts, x.now(0, time.Duration(n)*time.Minute)))
		x.fail(s, h, n, x.now(0, time.Duration(n)*time.Minute+time.Second))
	}
	x.requireDone(s, h, maxAttempts, x.now(0, 5*time.Minute))

	require.NoError(t, x.ledger.Request(ctx, s, "ops: retry after the bank fixed its API", x.now(0, 6*time.Minute)))
	rec := x.get(s)
	require.Equal(t, ledger.StatusPending, rec.Status)
	require.Equal(t, "ops: retry after the bank fixed its API", rec.Reason)
	require.Equal(t, maxAttempts, rec.Attempt, "a Request starts no attempt")
	requireTime(t, time.Time{}, rec.RetryAt, "Record.RetryAt of a pending slot")
	st := x.state("", x.at(0))
	x.requireOpen(st, x.at(0))
	requireTime(t, time.Time{}, st.Open[0].RetryAt, "pending slot's RetryAt")

	// maxAttempts more, numbered on from the earlier ones, with the
	// budget counted from the Request: left starts again at
	// maxAttempts-1.
	for n := maxAttempts + 1; n <= 2*maxAttempts; n++ {
		now := x.now(0, time.Duration(n+5)*time.Minute)
		got, left := x.beginLeft(s, h, maxAttempts, now)
		require.Equal(t, n, got)
		require.Equal(t, 2*maxAttempts-n, left, "attempts left after attempt %d (the second after the Request)", n)
		x.fail(s, h, n, now.Add(time.Second))
	}
	x.requireDone(s, h, maxAttempts, x.now(0, 20*time.Minute))
	rec = x.get(s)
	require.Equal(t, 2*maxAttempts, rec.Attempt)
	require.Len(t, rec.Attempts, 2*maxAttempts)
}

func testRequestReopens(t *testing.T, x *fixture) {
	ctx := t.Context()
	h := holder(1)
	succeeded, final := x.slot(0), x.slot(1)
	x.succeed(succeeded, h, x.begin(succeeded, h, 1, x.now(0, 0)), x.now(0, time.Second))
	x.finish(final, h, x.begin(final, h, 1, x.now(1, 0)), ledger.Outcome{
		Status: ledger.StatusFailed, Class: ledger.ClassPermanent, Error: "bad input",
	}, x.now(1, time.Second))
	x.requireDone(succeeded, h, 1, x.now(2, 0))
	x.requireDone(final, h, 1, x.now(2, 0))

	require.NoError(t, x.ledger.Request(ctx, succeeded, "re-run: upstream data corrected", x.now(2, time.Second)))
	require.NoError(t, x.ledger.Request(ctx, final, "retry: input fixed", x.now(2, time.Second)))
	x.requireOpen(x.state("", x.at(0)), x.at(0), x.at(1))
	require.Equal(t, "re-run: upstream data corrected", x.get(succeeded).Reason)
	require.Equal(t, "retry: input fixed", x.get(final).Reason)

	// With maxAttempts 1, and one attempt each made already: the budget is
	// fresh. A later holder begins them.
	later := holder(2)
	require.Equal(t, 2, x.begin(succeeded, later, 1, x.now(3, 0)))
	require.Equal(t, 2, x.begin(final, later, 1, x.now(3, 0)))
	x.succeed(succeeded, later, 2, x.now(3, time.Second))
	x.succeed(final, later, 2, x.now(3, time.Second))
	x.requireOpen(x.state("", x.at(0)))
}

func testRequestRunning(t *testing.T, x *fixture) {
	s, h := x.slot(0), holder(1)
	x.begin(s, h, 3, x.now(0, 0))
	before := x.get(s)
	err := x.ledger.Request(t.Context(), s, "ops", x.now(0, time.Second))
	require.ErrorIs(t, err, ledger.ErrSlotRunning)
	requireSameRecord(t, before, x.get(s), "a running slot after a refused Request")
}

// A backfill or a manual trigger of a slot the ledger never saw.
func testRequestUnknown(t *testing.T, x *fixture) {
	s, h := x.slot(0), holder(1)
	require.NoError(t, x.ledger.Request(t.Context(), s, "backfill 2026-03", x.now(0, 0)))
	rec := x.get(s)
	require.Equal(t, ledger.StatusPending, rec.Status)
	require.Equal(t, 0, rec.Attempt)
	require.Equal(t, "backfill 2026-03", rec.Reason)
	require.Empty(t, rec.Attempts)
	x.requireOpen(x.state("", x.at(0)), x.at(0))
	require.Equal(t, 1, x.begin(s, h, 3, x.now(0, time.Second)))
}
