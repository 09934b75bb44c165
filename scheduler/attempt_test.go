package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// TestDecideOutcome is the table of an attempt's end: for each way an
// attempt ends, its recorded status, class, error and next attempt's time.
func TestDecideOutcome(t *testing.T) {
	t.Parallel()
	// now falls between milliseconds: retry times round up to the next one.
	now := time.Date(2026, 3, 1, 12, 0, 0, 400_000, time.UTC)
	ms := func(d time.Duration) time.Time { return now.Add(d).Truncate(time.Millisecond).Add(time.Millisecond) }
	const backoff = 2 * time.Second
	failed := func(class ledger.ErrorClass, left int) ended {
		return ended{failed: true, text: "boom", class: class, left: left}
	}
	for _, tc := range []struct {
		name      string
		e         ended
		want      ledger.Outcome
		backoffed bool // the backoff was drawn
	}{
		{name: "SucceededHasNoRetry", e: ended{},
			want: ledger.Outcome{Status: ledger.StatusSucceeded}},
		{name: "RetryableWithBudgetLeftIsRetriedAfterBackoff", e: failed(ledger.ClassRetryable, 2),
			want: ledger.Outcome{Status: ledger.StatusFailed, Error: "boom", Class: ledger.ClassRetryable, RetryAt: ms(backoff)}, backoffed: true},
		{name: "RetryableWithBudgetSpentIsFinal", e: failed(ledger.ClassRetryable, 0),
			want: ledger.Outcome{Status: ledger.StatusFailed, Error: "boom", Class: ledger.ClassRetryable}},
		{name: "TimeoutIsRetried", e: failed(ledger.ClassTimeout, 1),
			want: ledger.Outcome{Status: ledger.StatusFailed, Error: "boom", Class: ledger.ClassTimeout, RetryAt: ms(backoff)}, backoffed: true},
		{name: "InterruptedIsRetried", e: failed(ledger.ClassInterrupted, 1),
			want: ledger.Outcome{Status: ledger.StatusFailed, Error: "boom", Class: ledger.ClassInterrupted, RetryAt: ms(backoff)}, backoffed: true},
		{name: "PermanentIsFinalWithBudgetLeft", e: failed(ledger.ClassPermanent, 2),
			want: ledger.Outcome{Status: ledger.StatusFailed, Error: "boom", Class: ledger.ClassPermanent}},
		{name: "ReplacedIsInterruptedAndFinal", e: ended{failed: true, text: "boom", class: ledger.ClassInterrupted, replaced: true, left: 2},
			want: ledger.Outcome{Status: ledger.StatusFailed, Error: errReplaced.Error() + ": boom", Class: ledger.ClassInterrupted}},
		{name: "DeferralAllowedWaitsItsOwnTimeUncounted",
			e:    ended{failed: true, text: "boom", class: ledger.ClassDeferred, left: 0, deferFor: 30 * time.Second, deferOK: true},
			want: ledger.Outcome{Status: ledger.StatusFailed, Error: "boom", Class: ledger.ClassDeferred, RetryAt: ms(30 * time.Second)}},
		{name: "DeferralRefusedCountsAsRetryable",
			e:    ended{failed: true, text: "boom", class: ledger.ClassDeferred, left: 1, deferFor: 30 * time.Second},
			want: ledger.Outcome{Status: ledger.StatusFailed, Error: "boom", Class: ledger.ClassRetryable, RetryAt: ms(backoff)}, backoffed: true},
		{name: "DeferralRefusedWithBudgetSpentIsFinal",
			e:    ended{failed: true, text: "boom", class: ledger.ClassDeferred, left: 0},
			want: ledger.Outcome{Status: ledger.StatusFailed, Error: "boom", Class: ledger.ClassRetryable}},
		{name: "DeferralOfAReplacedRunIsInterrupted",
			e:    ended{failed: true, text: "boom", class: ledger.ClassDeferred, replaced: true, left: 1, deferFor: time.Second, deferOK: true},
			want: ledger.Outcome{Status: ledger.StatusFailed, Error: errReplaced.Error() + ": boom", Class: ledger.ClassInterrupted}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			drawn := 0
			got := decideOutcome(tc.e, now, func() time.Duration { drawn++; return backoff })
			require.Equal(t, tc.want, got)
			want := 0
			if tc.backoffed {
				want = 1
			}
			require.Equal(t, want, drawn, "backoff draws (the jitter's random stream)")
		})
	}
}
