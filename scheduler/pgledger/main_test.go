package pgledger_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/scheduler/pgledger"
)

// These tests run against the real PostgreSQL at DATABASE_URL (see
// internal/pgtest). An unreachable database fails every test that needs it
// unless HOLDFAST_SKIP_INTEGRATION=1. Each test works in a schema of its
// own and drops it afterwards.

// shared is the package's one pool, opened by the first test that needs it
// and closed by TestMain before the goroutine leak check.
var shared struct {
	once sync.Once
	pool *pgxpool.Pool
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.pool != nil {
		shared.pool.Close() // stops the pool's health-check goroutine
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// testPool returns the shared pool, failing (or skipping, with
// HOLDFAST_SKIP_INTEGRATION=1) when Postgres is unreachable.
func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pgtest.Require(t)
	shared.once.Do(func() {
		cfg, err := pgxpool.ParseConfig(pgtest.URL())
		if err != nil {
			shared.err = err
			return
		}
		// The suite's race has 16 Begins in flight at once, beside the
		// other parallel subtests.
		cfg.MaxConns = 48
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shared.pool, shared.err = pgxpool.NewWithConfig(ctx, cfg)
	})
	require.NoError(t, shared.err)
	return shared.pool
}

// newSchema returns a fresh schema name and drops the schema when the test
// ends. Migrate creates it.
func newSchema(t testing.TB) string {
	t.Helper()
	pool := testPool(t)
	schema := fmt.Sprintf("pgledger_test_%016x", rand.Uint64())
	t.Cleanup(func() {
		// t.Context is already canceled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
		require.NoError(t, err)
	})
	return schema
}

// newLedger returns a migrated Ledger in a fresh schema.
func newLedger(t testing.TB) *pgledger.Ledger {
	t.Helper()
	l, err := pgledger.New(testPool(t), pgledger.Config{Schema: newSchema(t)})
	require.NoError(t, err)
	require.NoError(t, l.Migrate(t.Context()))
	return l
}
