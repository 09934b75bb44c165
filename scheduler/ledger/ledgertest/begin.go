package ledgertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// beginCases cover Begin and Finish: attempts, their records, and when a
// slot needs no further attempt.
var beginCases = []testCase{
	{"BeginStartsAttemptOne", testBeginStartsAttemptOne},
	{"BeginAfterLeaseLossAbandonsRunningAttempt", testBeginAfterLeaseLossAbandons},
	{"FinishSucceededRecordsAndIsDone", testFinishSucceeded},
	{"FinishFailedWithRetryRecordsAndIsOpen", testFinishFailedWithRetry},
	{"FinishFailedFinalIsDone", testFinishFailedFinal},
	{"MaxAttemptsExhaustedIsDone", testMaxAttemptsExhausted},
	{"DeferralDoesNotUseUpTheBudget", testDeferralDoesNotUseUpTheBudget},
	{"HeartbeatIsRecorded", testHeartbeat},
	{"BeginRecordsTheHolderLabel", testBeginRecordsHolder},
}

// Each attempt keeps the holder label (Fence.Holder) of the replica that
// began it, so views can say which replica ran it without the owner; a
// holder without a label records none, not its predecessor's.
func testBeginRecordsHolder(t *testing.T, x *fixture) {
	s, a, b, c := x.slot(0), holder(1), holder(2), holder(3)
	a.Holder, b.Holder = "replica-a", "replica-b 🛰"
	require.Equal(t, 1, x.begin(s, a, 3, x.now(0, time.Second)))
	require.Equal(t, 1, x.begin(s, a, 3, x.now(0, 2*time.Second)), "Begin again after a lost reply")
	require.Equal(t, 2, x.begin(s, b, 3, x.now(0, time.Minute)))
	require.Equal(t, 3, x.begin(s, c, 3, x.now(0, 2*time.Minute)))
	rec := x.get(s)
	require.Len(t, rec.Attempts, 3)
	require.Equal(t, "replica-a", rec.Attempts[0].Holder)
	require.Equal(t, "replica-b 🛰", rec.Attempts[1].Holder)
	require.Equal(t, "", rec.Attempts[2].Holder, "no label given, none recorded")
}

func testBeginStartsAttemptOne(t *testing.T, x *fixture) {
	s, a, now := x.slot(0), holder(1), x.now(0, time.Second)
	n, left := x.beginLeft(s, a, 3, now)
	require.Equal(t, 1, n)
	require.Equal(t, 2, left, "attempts left after the first of 3")
	// The same holder's Begin again (its reply was lost) is the same
	// attempt, with the same budget.
	n, left = x.beginLeft(s, a, 3, now)
	require.Equal(t, 1, n, "Begin again by the running attempt's owner")
	require.Equal(t, 2, left, "attempts left, Begin again by the owner")

	rec := x.get(s)
	require.Equal(t, ledger.StatusRunning, rec.Status)
	require.Equal(t, 1, rec.Attempt)
	requireTime(t, time.Time{}, rec.RetryAt, "Record.RetryAt")
	require.Len(t, rec.Attempts, 1)
	at := rec.Attempts[0]
	require.Equal(t, 1, at.N)
	require.Equal(t, a.Token, at.Token)
	require.Equal(t, a.Owner, at.Owner)
	require.Equal(t, ledger.StatusRunning, at.Status)
	require.Equal(t, ledger.ClassNone, at.Class)
	require.Empty(t, at.Error)
	requireTime(t, now, at.Started, "Attempt.Started")
	requireTime(t, time.Time{}, at.Finished, "Attempt.Finished")
}

// A holder lost the lease mid-attempt; the next holder's Begin marks the
// running attempt abandoned and starts attempt 2.
func testBeginAfterLeaseLossAbandons(t *testing.T, x *fixture) {
	s, a, b := x.slot(0), holder(1), holder(2)
	require.Equal(t, 1, x.begin(s, a, 3, x.now(0, time.Second)))
	require.Equal(t, 2, x.begin(s, b, 3, x.now(0, time.Minute)))

	rec := x.get(s)
	require.Equal(t, ledger.StatusRunning, rec.Status)
	require.Equal(t, 2, rec.Attempt)
	require.Len(t, rec.Attempts, 2)
	first, second := rec.Attempts[0], rec.Attempts[1]
	require.Equal(t, 1, first.N)
	require.Equal(t, ledger.StatusAbandoned, first.Status, "attempt 1 of the holder that lost the lease")
	require.Equal(t, a.Token, first.Token)
	require.Equal(t, a.Owner, first.Owner)
	require.Equal(t, 2, second.N)
	require.Equal(t, ledger.StatusRunning, second.Status)
	require.Equal(t, b.Token, second.Token)
	require.Equal(t, b.Owner, second.Owner)
	requireTime(t, x.now(0, time.Minute), second.Started, "Attempt[1].Started")
}

func testFinishSucceeded(t *testing.T, x *fixture) {
	s, a := x.slot(0), holder(1)
	n := x.begin(s, a, 3, x.now(0, time.Second))
	done := x.now(0, 30*time.Second)
	x.succeed(s, a, n, done)

	rec := x.get(s)
	require.Equal(t, ledger.StatusSucceeded, rec.Status)
	require.Equal(t, 1, rec.Attempt)
	requireTime(t, time.Time{}, rec.RetryAt, "Record.RetryAt")
	require.Len(t, rec.Attempts, 1)
	require.Equal(t, ledger.StatusSucceeded, rec.Attempts[0].Status)
	require.Empty(t, rec.Attempts[0].Error)
	requireTime(t, done, rec.Attempts[0].Finished, "Attempt.Finished")

	// Neither the same holder nor a later one runs it again.
	x.requireDone(s, a, 3, x.now(0, time.Minute))
	x.requireDone(s, holder(2), 3, x.now(0, 2*time.Minute))
	x.requireOpen(x.state("", x.at(-10)))
	require.Equal(t, ledger.StatusSucceeded, x.get(s).Status)
}

func testFinishFailedWithRetry(t *testing.T, x *fixture) {
	s, a := x.slot(0), holder(1)
	n := x.begin(s, a, 3, x.now(0, time.Second))
	done, retry := x.now(0, 10*time.Second), x.now(0, 70*time.Second)
	x.finish(s, a, n, ledger.Outcome{
		Status: ledger.StatusFailed, Class: ledger.ClassRetryable, Error: "bank API: 503", RetryAt: retry,
	}, done)

	rec := x.get(s)
	require.Equal(t, ledger.StatusFailed, rec.Status)
	require.Equal(t, 1, rec.Attempt)
	requireTime(t, retry, rec.RetryAt, "Record.RetryAt")
	require.Len(t, rec.Attempts, 1)
	at := rec.Attempts[0]
	require.Equal(t, ledger.StatusFailed, at.Status)
	require.Equal(t, ledger.ClassRetryable, at.Class)
	require.Equal(t, "bank API: 503", at.Error)
	requireTime(t, done, at.Finished, "Attempt.Finished")

	st := x.state("", x.at(0))
	x.requireOpen(st, x.at(0))
	requireTime(t, retry, st.Open[0].RetryAt, "OpenSlot.RetryAt")

	require.Equal(t, 2, x.begin(s, a, 3, retry))
	rec = x.get(s)
	require.Equal(t, ledger.StatusRunning, rec.Status)
	require.Equal(t, 2, rec.Attempt)
	require.Equal(t, ledger.StatusFailed, rec.Attempts[0].Status, "attempt 1 keeps its outcome")
}

// A failure with a zero RetryAt is final: not open, no further attempt
// although maxAttempts allows more.
func testFinishFailedFinal(t *testing.T, x *fixture) {
	s, a := x.slot(0), holder(1)
	n := x.begin(s, a, 3, x.now(0, time.Second))
	done := x.now(0, 5*time.Second)
	x.finish(s, a, n, ledger.Outcome{
		Status: ledger.StatusFailed, Class: ledger.ClassPermanent, Error: "invalid account",
	}, done)

	rec := x.get(s)
	require.Equal(t, ledger.StatusFailed, rec.Status)
	requireTime(t, time.Time{}, rec.RetryAt, "Record.RetryAt")
	require.Equal(t, ledger.ClassPermanent, rec.Attempts[0].Class)
	require.Equal(t, "invalid account", rec.Attempts[0].Error)
	requireTime(t, done, rec.Attempts[0].Finished, "Attempt.Finished")

	x.requireOpen(x.state("", x.at(-10)))
	x.requireDone(s, a, 3, x.now(0, time.Minute))
	x.requireDone(s, holder(2), 3, x.now(0, time.Minute))
}

func testMaxAttemptsExhausted(t *testing.T, x *fixture) {
	s, a := x.slot(0), holder(1)
	const maxAttempts = 2
	for want := 1; want <= maxAttempts; want++ {
		now := x.now(0, time.Duration(want)*time.Minute)
		n, left := x.beginLeft(s, a, maxAttempts, now)
		require.Equal(t, want, n)
		require.Equal(t, maxAttempts-want, left, "attempts left after attempt %d", n)
		x.fail(s, a, want, now.Add(time.Second))
	}
	x.requireDone(s, a, maxAttempts, x.now(0, 10*time.Minute))
	x.requireDone(s, holder(2), maxAttempts, x.now(0, 11*time.Minute))

	rec := x.get(s)
	require.Equal(t, ledger.StatusFailed, rec.Status)
	require.Equal(t, maxAttempts, rec.Attempt)
	require.Len(t, rec.Attempts, maxAttempts)
	// Its attempts are spent: it no longer needs one.
	x.requireOpen(x.state("", x.at(-10)))
}

// A failure of class deferred with a retry time (the job was told to come
// back later) is recorded, and the slot is open at its retry time, but it
// does not count against the budget: with maxAttempts 1, two deferrals
// leave the slot a real attempt, whose failure then ends it.
func testDeferralDoesNotUseUpTheBudget(t *testing.T, x *fixture) {
	s, a := x.slot(0), holder(1)
	const maxAttempts = 1
	for want := 1; want <= 3; want++ {
		now := x.now(0, time.Duration(want)*time.Minute)
		n, left := x.beginLeft(s, a, maxAttempts, now)
		require.Equal(t, want, n)
		require.Equal(t, 0, left, "attempt %d: deferrals before it used none of the budget", n)
		if want == 3 {
			x.fail(s, a, n, now.Add(time.Second))
			break
		}
		retry := now.Add(30 * time.Second)
		x.finish(s, a, n, ledger.Outcome{Status: ledger.StatusFailed, Class: ledger.ClassDeferred, Error: "in flight", RetryAt: retry}, now.Add(time.Second))
		rec := x.get(s)
		require.Equal(t, ledger.StatusFailed, rec.Status)
		requireTime(t, ms(retry), rec.RetryAt, "Record.RetryAt of a deferral")
		require.Equal(t, ledger.ClassDeferred, rec.Attempts[n-1].Class)
	}
	// The real attempt failed: the budget of 1 is spent.
	x.requireDone(s, a, maxAttempts, x.now(0, 10*time.Minute))
	require.Len(t, x.get(s).Attempts, 3)
}

func testHeartbeat(t *testing.T, x *fixture) {
	s, a := x.slot(0), holder(1)
	started := x.now(0, time.Second)
	n := x.begin(s, a, 3, started)
	for _, d := range []time.Duration{10 * time.Second, 20 * time.Second} {
		hb := x.now(0, d)
		require.NoError(t, x.ledger.Heartbeat(t.Context(), s, a, n, hb))
		rec := x.get(s)
		require.Equal(t, ledger.StatusRunning, rec.Status)
		requireTime(t, hb, rec.Attempts[0].Heartbeat, "Attempt.Heartbeat")
		requireTime(t, started, rec.Attempts[0].Started, "Attempt.Started")
	}
}
