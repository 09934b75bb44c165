package pgtx_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/internal/pgtx"
)

var shared = pgtest.Shared{MaxConns: 4}

func TestMain(m *testing.M) { pgtest.Main(m, &shared) }

// Batch and Tx name READ COMMITTED whatever the connection's default.
func TestBatchAndTxRunAtReadCommittedWhateverTheDefault(t *testing.T) {
	t.Parallel()
	pgtest.EachIsolation(t, func(t *testing.T, iso string) {
		pool := shared.PoolAt(t, iso)
		var level string
		require.NoError(t, pool.QueryRow(t.Context(), `SHOW transaction_isolation`).Scan(&level))
		require.Equal(t, iso, level, "a statement alone runs at the default")

		level = ""
		require.NoError(t, pgtx.Batch(t.Context(), pool, func(b *pgx.Batch) {
			b.Queue(`SHOW transaction_isolation`).QueryRow(func(row pgx.Row) error { return row.Scan(&level) })
		}))
		require.Equal(t, "read committed", level)

		level = ""
		require.NoError(t, pgtx.Tx(t.Context(), pool, func(tx pgx.Tx) error {
			return tx.QueryRow(t.Context(), `SHOW transaction_isolation`).Scan(&level)
		}))
		require.Equal(t, "read committed", level)
	})
}

// AtReadCommitted holds in a statement sent alone only where the default
// is READ COMMITTED, and in Batch at every default: a statement that gates
// its writes on it writes nothing alone at a stricter default.
func TestAtReadCommittedGatesAStatementSentAlone(t *testing.T) {
	t.Parallel()
	pgtest.EachIsolation(t, func(t *testing.T, iso string) {
		ctx := t.Context()
		pool := shared.PoolAt(t, iso)
		schema := shared.Schema(t, "pgtx_")
		table := pgx.Identifier{schema, "t"}.Sanitize()
		_, err := pool.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()+`; CREATE TABLE `+table+` (n int)`)
		require.NoError(t, err)
		insert := `INSERT INTO ` + table + ` SELECT $1::int WHERE ` + pgtx.AtReadCommitted

		var alone bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT `+pgtx.AtReadCommitted).Scan(&alone))
		require.Equal(t, iso == "read committed", alone)
		tag, err := pool.Exec(ctx, insert, 1)
		require.NoError(t, err)
		require.Equal(t, map[bool]int64{true: 1, false: 0}[alone], tag.RowsAffected(), "written alone only at READ COMMITTED")

		var inBatch bool
		require.NoError(t, pgtx.Batch(ctx, pool, func(b *pgx.Batch) {
			b.Queue(`SELECT ` + pgtx.AtReadCommitted).QueryRow(func(row pgx.Row) error { return row.Scan(&inBatch) })
			b.Queue(insert, 2)
		}))
		require.True(t, inBatch)
		rows, err := pool.Query(ctx, `SELECT n FROM `+table+` ORDER BY n`)
		require.NoError(t, err)
		got, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		require.NoError(t, err)
		want := []int32{2}
		if alone {
			want = []int32{1, 2}
		}
		require.Equal(t, want, got)
	})
}

func TestLoneTriesAloneUntilAnotherLevelIsFound(t *testing.T) {
	t.Parallel()
	var l pgtx.Lone
	require.True(t, l.Try())
	l.NotReadCommitted()
	require.False(t, l.Try())
}

// Batch and Tx give a pool its connection back, after a commit and after
// a failure alike.
func TestBatchAndTxReleaseThePoolsConnection(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pgtest.Require(t)
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	require.NoError(t, err)
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	// Close waits for every connection to come back: one never given
	// back would hang it, so such a pool is left open (and goleak, in
	// TestMain, reports its goroutines) rather than closed.
	given := true
	defer func() {
		if given {
			pool.Close()
		}
	}()
	ok := func(b *pgx.Batch) { b.Queue(`SELECT 1`) }
	bad := func(b *pgx.Batch) { b.Queue(`SELECT 1/0`) }
	for i, run := range []func() error{
		func() error { return pgtx.Batch(ctx, pool, ok) },
		func() error { return pgtx.Batch(ctx, pool, bad) },
		func() error {
			return pgtx.Tx(ctx, pool, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, `SELECT 1`); return err })
		},
		func() error {
			return pgtx.Tx(ctx, pool, func(tx pgx.Tx) error { _, err := tx.Exec(ctx, `SELECT 1/0`); return err })
		},
	} {
		err := run()
		require.Equal(t, i%2 == 1, err != nil, "call %d: %v", i, err)
		if n := pool.Stat().AcquiredConns(); n != 0 {
			given = false
			t.Fatalf("call %d left %d connection(s) acquired", i, n)
		}
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT 1`).Scan(&n), "call %d: the connection is usable", i)
		require.Equal(t, 1, n)
	}
}

// A statement that fails in a Batch rolls the transaction back, and the
// connection is idle again: the next use of it works.
func TestBatchFailureRollsBackAndLeavesTheConnectionIdle(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	conn, err := shared.Pool(t).Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	c := conn.Conn()
	_, err = c.Exec(ctx, `CREATE TEMP TABLE pgtx_t (n int)`)
	require.NoError(t, err)

	err = pgtx.Batch(ctx, c, func(b *pgx.Batch) {
		b.Queue(`INSERT INTO pgtx_t VALUES (1)`)
		b.Queue(`SELECT 1/0`)
	})
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "22012", pgErr.Code) // division_by_zero
	require.Equal(t, byte('I'), c.PgConn().TxStatus(), "rolled back, not left in a failed transaction")
	var n int
	require.NoError(t, c.QueryRow(ctx, `SELECT count(*) FROM pgtx_t`).Scan(&n))
	require.Zero(t, n, "the insert before the failure was rolled back")

	require.NoError(t, pgtx.Batch(ctx, c, func(b *pgx.Batch) { b.Queue(`INSERT INTO pgtx_t VALUES (2)`) }))
	require.NoError(t, c.QueryRow(ctx, `SELECT count(*) FROM pgtx_t`).Scan(&n))
	require.Equal(t, 1, n, "committed")
}

func TestRetry(t *testing.T) {
	t.Parallel()
	serialization := &pgconn.PgError{Code: "40001"}
	deadlock := &pgconn.PgError{Code: "40P01"}

	t.Run("RetriesSerializationFailuresAndDeadlocks", func(t *testing.T) {
		t.Parallel()
		calls := 0
		err := pgtx.Retry(t.Context(), func() error {
			calls++
			switch calls {
			case 1:
				return serialization
			case 2:
				return deadlock
			}
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, 3, calls)
	})
	t.Run("StopsAtOtherErrors", func(t *testing.T) {
		t.Parallel()
		calls := 0
		other := &pgconn.PgError{Code: "23505"}
		err := pgtx.Retry(t.Context(), func() error { calls++; return other })
		require.ErrorIs(t, err, other)
		require.Equal(t, 1, calls)
	})
	t.Run("StopsAfterMaxAttempts", func(t *testing.T) {
		t.Parallel()
		calls := 0
		err := pgtx.Retry(t.Context(), func() error { calls++; return serialization })
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, "40001", pgErr.Code)
		require.Equal(t, pgtx.MaxAttempts, calls)
	})
	t.Run("StopsWhenTheContextEnds", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		calls := 0
		err := pgtx.Retry(ctx, func() error {
			calls++
			cancel()
			return serialization
		})
		require.ErrorIs(t, err, context.Canceled)
		require.True(t, pgtx.Retryable(err), "the last attempt's error is kept")
		require.Equal(t, 1, calls)
	})
	require.False(t, pgtx.Retryable(errors.New("x")))
	require.False(t, pgtx.Retryable(nil))
}

// Batch and Tx refuse, before any I/O, a connection inside a transaction
// begun by hand (and Batch a pgx.Tx): their BEGIN would only warn, and
// their COMMIT would commit the caller's transaction, so a row the caller
// then rolled back stayed. Control: the same batch sent as Batch sends it
// commits the caller's row.
func TestBatchAndTxRefuseAConnectionInsideATransaction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := shared.Pool(t)
	schema := shared.Schema(t, "pgtx_intx_")
	table := pgx.Identifier{schema, "rows"}.Sanitize()
	_, err := pool.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()+`; CREATE TABLE `+table+` (id int PRIMARY KEY)`)
	require.NoError(t, err)
	count := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n))
		return n
	}
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()

	_, err = conn.Exec(ctx, `BEGIN`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `INSERT INTO `+table+` VALUES (1)`)
	require.NoError(t, err)
	require.True(t, pgtx.InTransaction(conn))
	require.True(t, pgtx.InTransaction(conn.Conn()))
	nothing := func(*pgx.Batch) { t.Fatal("queued a statement") }
	require.ErrorIs(t, pgtx.Batch(ctx, conn, nothing), pgtx.ErrInTransaction)
	require.ErrorIs(t, pgtx.Batch(ctx, conn.Conn(), nothing), pgtx.ErrInTransaction)
	require.ErrorIs(t, pgtx.Tx(ctx, conn.Conn(), func(pgx.Tx) error { t.Fatal("ran"); return nil }), pgtx.ErrInTransaction)
	require.Equal(t, byte('T'), conn.Conn().PgConn().TxStatus(), "the caller's transaction is still open")
	_, err = conn.Exec(ctx, `ROLLBACK`)
	require.NoError(t, err)
	require.Zero(t, count(), "the caller's rollback undid its row")
	require.False(t, pgtx.InTransaction(conn), "idle again")

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	require.ErrorIs(t, pgtx.Batch(ctx, tx, nothing), pgtx.ErrInTransaction, "a pgx.Tx")
	require.NoError(t, tx.Rollback(ctx))

	// Control: Batch's pipeline (BEGIN, a statement, COMMIT) on that
	// connection commits the row of the caller's transaction.
	_, err = conn.Exec(ctx, `BEGIN`)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `INSERT INTO `+table+` VALUES (2)`)
	require.NoError(t, err)
	b := &pgx.Batch{}
	b.BeginTx(pgtx.ReadCommitted)
	b.Queue(`SELECT 1`)
	b.Queue("COMMIT")
	require.NoError(t, conn.SendBatch(ctx, b).Close())
	_, err = conn.Exec(ctx, `ROLLBACK`)
	require.NoError(t, err)
	require.Equal(t, 1, count(), "the unguarded batch committed the caller's row")
}
