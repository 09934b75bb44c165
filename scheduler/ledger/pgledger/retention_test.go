package pgledger_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/ledgertest"
	"github.com/holdfast-go/holdfast/scheduler/ledger/pgledger"
)

// Prune deletes the done slots before the cutoff, in batches, and keeps
// what is open and what gap detection reads (the Retention section of the
// package documentation, which docs/operations.md sends operators to).
func TestPruneKeepsWhatIsOpenAcrossBatches(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	l, err := pgledger.New(testPool(t), pgledger.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, l.Migrate(ctx))

	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Minute) }
	slot := func(i int) ledger.Slot { return ledger.Slot{Job: "prune", At: at(i)} }
	f := ledger.Fence{Scope: ledger.UnitScope("prune", ""), Token: ledgertest.TokenBase, Owner: "a"}
	finish := func(i int, o ledger.Outcome) {
		n, _, err := l.Begin(ctx, slot(i), f, 3, at(i))
		require.NoError(t, err)
		require.NoError(t, l.Finish(ctx, slot(i), f, n, o, at(i)))
	}
	finish(0, ledger.Outcome{Status: ledger.StatusSucceeded})
	finish(1, ledger.Outcome{Status: ledger.StatusFailed, Error: "final"})
	finish(2, ledger.Outcome{Status: ledger.StatusFailed, Error: "again", RetryAt: at(3)})
	require.NoError(t, l.Skip(ctx, slot(3), f, ledger.StatusSkipped, "overlap", at(3)))
	require.NoError(t, l.Skip(ctx, slot(4), f, ledger.StatusMissed, "missed: awaits an operator", at(4)))
	// More than one batch of succeeded slots.
	const many = pgledger.PruneBatch + 5
	for i := 100; i < 100+many; i++ {
		require.NoError(t, l.Skip(ctx, slot(i), f, ledger.StatusSkipped, "bulk", at(i)))
	}
	last := 100 + many + 10
	finish(last, ledger.Outcome{Status: ledger.StatusSucceeded}) // after the cutoff

	n, err := l.Prune(ctx, at(100+many))
	require.NoError(t, err)
	require.EqualValues(t, 4+many, n, "succeeded, final failure, skipped, missed and the bulk")
	for i, want := range map[int]bool{0: false, 1: false, 2: true, 3: false, 4: false, 100: false, 100 + many - 1: false, last: true} {
		_, found, err := l.Get(ctx, slot(i))
		require.NoError(t, err)
		require.Equal(t, want, found, "slot %d kept", i)
	}
	st, err := l.State(ctx, "prune", "", time.Time{}, at(last+1))
	require.NoError(t, err)
	require.Equal(t, at(last), st.Last, "gap detection still knows the last slot")
	require.Len(t, st.Open, 1, "the failure with a retry is still open")
	require.Equal(t, at(2), st.Open[0].At)
	n, err = l.Prune(ctx, at(100+many))
	require.NoError(t, err)
	require.Zero(t, n, "a second Prune finds nothing")
}
