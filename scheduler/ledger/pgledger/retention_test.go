package pgledger_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/ledgertest"
	"github.com/holdfast-go/holdfast/scheduler/ledger/pgledger"
)

// retentionSQL returns the DELETE of the package documentation's Retention
// section, for schema: docs/operations.md sends operators there, so it
// must exist and do what it says.
func retentionSQL(t *testing.T, schema string) string {
	t.Helper()
	doc, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?s)// # Retention\n.*?((?://\t[^\n]*\n)+)`).FindSubmatch(doc)
	require.NotNil(t, m, "doc.go has a Retention section with an indented statement")
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(string(m[1])), "\n") {
		b.WriteString(strings.TrimPrefix(line, "//\t") + "\n")
	}
	return strings.ReplaceAll(b.String(), "holdfast.", pgx.Identifier{schema}.Sanitize()+".")
}

func TestRetentionJobOfTheDocsKeepsWhatIsOpen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	l, err := pgledger.New(testPool(t), pgledger.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, l.Migrate(ctx))

	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Minute) }
	slot := func(i int) ledger.Slot { return ledger.Slot{Job: "prune", At: at(i)} }
	f := ledger.Fence{Scope: "prune", Token: ledgertest.TokenBase, Owner: "a"}
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
	finish(10, ledger.Outcome{Status: ledger.StatusSucceeded}) // after the cutoff

	tag, err := testPool(t).Exec(ctx, retentionSQL(t, schema), at(5))
	require.NoError(t, err)
	require.EqualValues(t, 3, tag.RowsAffected(), "succeeded, final failure, skipped")
	for i, want := range map[int]bool{0: false, 1: false, 2: true, 3: false, 4: true, 10: true} {
		_, found, err := l.Get(ctx, slot(i))
		require.NoError(t, err)
		require.Equal(t, want, found, "slot %d kept", i)
	}
	st, err := l.State(ctx, "prune", "", time.Time{}, at(11))
	require.NoError(t, err)
	require.Equal(t, at(10), st.Last, "gap detection still knows the last slot")
	require.Len(t, st.Open, 1, "the failure with a retry is still open")
	require.Equal(t, at(2), st.Open[0].At)
}
