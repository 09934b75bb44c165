package pgledger_test

import (
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/scheduler/ledger/pgledger"
)

// These tests run against the real PostgreSQL at DATABASE_URL (see
// internal/pgtest). An unreachable database fails every test that needs it
// unless HOLDFAST_SKIP_INTEGRATION=1. Each test works in a schema of its
// own and drops it afterwards.

// shared is the package's one pool; the suite's race has 16 Begins in
// flight at once, beside the other parallel subtests.
var shared = pgtest.Shared{MaxConns: 48}

func TestMain(m *testing.M) { pgtest.Main(m, &shared) }

func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return shared.Pool(t)
}

// newSchema returns a fresh schema name and drops the schema when the test
// ends. Migrate creates it.
func newSchema(t testing.TB) string {
	t.Helper()
	return shared.Schema(t, "pgledger_test_")
}

// newLedger returns a migrated Ledger in a fresh schema.
func newLedger(t testing.TB) *pgledger.Ledger {
	t.Helper()
	return newLedgerOn(t, testPool(t))
}

// newLedgerOn returns a migrated Ledger on pool in a fresh schema.
func newLedgerOn(t testing.TB, pool *pgxpool.Pool) *pgledger.Ledger {
	t.Helper()
	l, err := pgledger.New(pool, pgledger.Options{Schema: newSchema(t)})
	require.NoError(t, err)
	require.NoError(t, l.Migrate(t.Context()))
	return l
}
