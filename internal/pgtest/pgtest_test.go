package pgtest_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/pgtest"
)

// OwnPool applies configure; Schema's schema is gone when the test that
// asked for it ends, and the pool is closed after the drop.
func TestOwnPoolAndSchemaCleanUpAfterTheTest(t *testing.T) {
	t.Parallel()
	var pool *pgxpool.Pool
	var schema string
	t.Run("inner", func(t *testing.T) {
		pool = pgtest.OwnPool(t, func(cfg *pgxpool.Config) { cfg.MaxConns = 2 })
		require.EqualValues(t, 2, pool.Config().MaxConns)
		schema = pgtest.Schema(t, pool, "pgtest_test_")
		_, err := pool.Exec(t.Context(), `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize())
		require.NoError(t, err)
	})
	check := pgtest.OwnPool(t, nil)
	var n int
	require.NoError(t, check.QueryRow(t.Context(),
		`SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1`, schema).Scan(&n))
	require.Zero(t, n, "schema %s not dropped", schema)
	require.Error(t, pool.Ping(t.Context()), "pool not closed")
}
