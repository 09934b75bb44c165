package pgfence_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// table is one test's user table with fence columns, in a fresh schema:
//
//	items(id text PRIMARY KEY, value text NOT NULL DEFAULT '', note text,
//	      fence_token bigint, fence_owner text, fence_scope text)
type table struct {
	pool  *pgxpool.Pool
	ident pgx.Identifier
}

func newTable(t testing.TB) *table {
	t.Helper()
	pool := testPool(t)
	schema := newSchema(t)
	tb := &table{pool: pool, ident: pgx.Identifier{schema, "items"}}
	_, err := pool.Exec(context.Background(), `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()+`;
CREATE TABLE `+tb.ident.Sanitize()+` (
	id          text PRIMARY KEY,
	value       text NOT NULL DEFAULT '',
	note        text,
	fence_token bigint,
	fence_owner text, fence_scope text)`)
	require.NoError(t, err)
	return tb
}

func (tb *table) row(id string) pgfence.Row {
	return pgfence.Row{Table: tb.ident, KeyColumn: "id", Key: id}
}

// insert creates a row as the application would, before any fenced write:
// fence columns NULL.
func (tb *table) insert(t *testing.T, id string) {
	t.Helper()
	_, err := tb.pool.Exec(t.Context(), `INSERT INTO `+tb.ident.Sanitize()+` (id) VALUES ($1)`, id)
	require.NoError(t, err)
}

type rowState struct {
	Value string
	Note  *string
	Token *int64
	Owner *string
}

func (tb *table) get(t *testing.T, id string) rowState {
	t.Helper()
	var s rowState
	require.NoError(t, tb.pool.QueryRow(t.Context(),
		`SELECT value, note, fence_token, fence_owner FROM `+tb.ident.Sanitize()+` WHERE id = $1`, id).
		Scan(&s.Value, &s.Note, &s.Token, &s.Owner))
	return s
}

func ptr[T any](v T) *T { return &v }

func TestFencedUpdateFollowsTheRule(t *testing.T) {
	t.Parallel()
	tb := newTable(t)
	ctx := t.Context()
	tb.insert(t, "a")
	row := tb.row("a")

	// NULL fence columns: any token is the first.
	require.NoError(t, pgfence.FencedUpdate(ctx, tb.pool, row, map[string]any{"value": "v10", "note": "n"}, fence.Holder{Token: 10, Owner: "owner-a"}))
	require.Equal(t, rowState{"v10", ptr("n"), ptr[int64](10), ptr("owner-a")}, tb.get(t, "a"))

	stale := func(err error, presented, current fence.Token) {
		t.Helper()
		var se *fence.StaleTokenError
		require.ErrorAs(t, err, &se)
		require.ErrorIs(t, err, fence.ErrStaleToken)
		require.NotErrorIs(t, err, pgfence.ErrRowNotFound)
		require.Equal(t, presented, se.Presented)
		require.Equal(t, current, se.Current)
		require.Equal(t, tb.ident[0]+".items[id=a]", se.Resource)
	}
	stale(pgfence.FencedUpdate(ctx, tb.pool, row, map[string]any{"value": "lost"}, fence.Holder{Token: 9, Owner: "owner-b"}), 9, 10)
	stale(pgfence.FencedUpdate(ctx, tb.pool, row, map[string]any{"value": "lost"}, fence.Holder{Token: 10, Owner: "owner-b"}), 10, 10)
	require.Equal(t, rowState{"v10", ptr("n"), ptr[int64](10), ptr("owner-a")}, tb.get(t, "a"), "refused writes change nothing")

	require.NoError(t, pgfence.FencedUpdate(ctx, tb.pool, row, map[string]any{"value": "v10b"}, fence.Holder{Token: 10, Owner: "owner-a"}), "same holder again")
	require.NoError(t, pgfence.FencedUpdate(ctx, tb.pool, row, map[string]any{"note": nil}, fence.Holder{Token: 11, Owner: "owner-b"}))
	require.Equal(t, rowState{"v10b", nil, ptr[int64](11), ptr("owner-b")}, tb.get(t, "a"), "columns not in set are kept")

	// An empty set raises the fence only.
	require.NoError(t, pgfence.FencedUpdate(ctx, tb.pool, row, nil, fence.Holder{Token: 12, Owner: "owner-c"}))
	require.Equal(t, rowState{"v10b", nil, ptr[int64](12), ptr("owner-c")}, tb.get(t, "a"))

	require.NoError(t, pgfence.FencedUpdate(ctx, tb.pool, row, nil, fence.Holder{Token: math.MaxInt64, Owner: "owner-d"}))
	stale(pgfence.FencedUpdate(ctx, tb.pool, row, nil, fence.Holder{Token: math.MaxInt64 - 1, Owner: "owner-e"}), math.MaxInt64-1, math.MaxInt64)
}

func TestFencedUpdateTellsMissingRowFromStale(t *testing.T) {
	t.Parallel()
	tb := newTable(t)
	ctx := t.Context()

	err := pgfence.FencedUpdate(ctx, tb.pool, tb.row("absent"), map[string]any{"value": "v"}, fence.Holder{Token: 5, Owner: "owner"})
	require.ErrorIs(t, err, pgfence.ErrRowNotFound)
	require.NotErrorIs(t, err, fence.ErrStaleToken)
	require.NotErrorIs(t, err, pgfence.ErrRetryable)
	require.Equal(t, 1, strings.Count(err.Error(), "pgfence:"), "one package prefix: %q", err)
	require.Contains(t, err.Error(), "row not found")

	// A row whose fence was raised by a zero-valued default still takes
	// a first token.
	_, err = tb.pool.Exec(ctx, `INSERT INTO `+tb.ident.Sanitize()+` (id, fence_token, fence_owner) VALUES ('zero', 0, '')`)
	require.NoError(t, err)
	require.NoError(t, pgfence.FencedUpdate(ctx, tb.pool, tb.row("zero"), map[string]any{"value": "v"}, fence.Holder{Token: 1, Owner: "owner"}))
}

func TestFencedUpdateInCallerTransaction(t *testing.T) {
	t.Parallel()
	tb := newTable(t)
	ctx := t.Context()
	tb.insert(t, "a")

	// Rolled back with the caller's transaction.
	tx, err := tb.pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, pgfence.FencedUpdate(ctx, tx, tb.row("a"), map[string]any{"value": "rolled-back"}, fence.Holder{Token: 5, Owner: "owner"}))
	require.NoError(t, tx.Rollback(ctx))
	require.Equal(t, rowState{Value: ""}, tb.get(t, "a"))

	// A refusal inside a transaction does not abort it.
	require.NoError(t, pgfence.FencedUpdate(ctx, tb.pool, tb.row("a"), map[string]any{"value": "v7"}, fence.Holder{Token: 7, Owner: "owner"}))
	require.NoError(t, pgx.BeginFunc(ctx, tb.pool, func(tx pgx.Tx) error {
		err := pgfence.FencedUpdate(ctx, tx, tb.row("a"), map[string]any{"value": "lost"}, fence.Holder{Token: 6, Owner: "old"})
		require.ErrorIs(t, err, fence.ErrStaleToken)
		return pgfence.FencedUpdate(ctx, tx, tb.row("a"), map[string]any{"value": "v8"}, fence.Holder{Token: 8, Owner: "owner"})
	}))
	require.Equal(t, "v8", tb.get(t, "a").Value)

	// On a single connection.
	conn, err := tb.pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	require.NoError(t, pgfence.FencedUpdate(ctx, conn.Conn(), tb.row("a"), map[string]any{"value": "v9"}, fence.Holder{Token: 9, Owner: "owner"}))
	require.Equal(t, "v9", tb.get(t, "a").Value)
}

func TestFencedWritesQuoteIdentifiers(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	ctx := t.Context()
	schema := newSchema(t)
	// Names that would break or inject if spliced in unquoted.
	weird := pgx.Identifier{schema, `Items "x"; DROP TABLE canary; --`}
	col := `Value'); DROP TABLE canary; --`
	key := `Id"`
	_, err := pool.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()+`;
CREATE TABLE `+pgx.Identifier{schema, "canary"}.Sanitize()+` (x int);
CREATE TABLE `+weird.Sanitize()+` (`+pgx.Identifier{key}.Sanitize()+` text PRIMARY KEY, `+
		pgx.Identifier{col}.Sanitize()+` text, fence_token bigint, fence_owner text, fence_scope text)`)
	require.NoError(t, err)

	row := pgfence.Row{Table: weird, KeyColumn: key, Key: `k'; DROP TABLE canary; --`}
	require.NoError(t, pgfence.FencedUpsert(ctx, pool, row, map[string]any{col: "v1"}, fence.Holder{Token: 1, Owner: "o"}))
	require.NoError(t, pgfence.FencedUpdate(ctx, pool, row, map[string]any{col: "v2"}, fence.Holder{Token: 2, Owner: "o"}))
	require.ErrorIs(t, pgfence.FencedUpdate(ctx, pool, row, map[string]any{col: "v0"}, fence.Holder{Token: 1, Owner: "p"}), fence.ErrStaleToken)

	var v string
	require.NoError(t, pool.QueryRow(ctx, `SELECT `+pgx.Identifier{col}.Sanitize()+` FROM `+weird.Sanitize()).Scan(&v))
	require.Equal(t, "v2", v)
	var canaries int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'canary'`, schema).Scan(&canaries))
	require.Equal(t, 1, canaries)
}

func TestFencedWritesBadInput(t *testing.T) {
	t.Parallel()
	good := pgfence.Row{Table: pgx.Identifier{"s", "t"}, KeyColumn: "id", Key: 1}
	withTable := func(tbl ...string) pgfence.Row { r := good; r.Table = tbl; return r }
	withKey := func(k string) pgfence.Row { r := good; r.KeyColumn = k; return r }
	set := map[string]any{"v": 1}
	tests := []struct {
		name  string
		row   pgfence.Row
		set   map[string]any
		token fence.Token
		owner string
		want  error
	}{
		{"TokenZero", good, set, fence.None, "o", fence.ErrNoToken},
		{"TokenAboveMaxInt64", good, set, math.MaxInt64 + 1, "o", pgfence.ErrTokenOutOfRange},
		{"EmptyOwner", good, set, 1, "", pgfence.ErrInvalidOwner},
		{"OwnerWithNUL", good, set, 1, "o\x00", pgfence.ErrInvalidOwner},
		{"NoTable", withTable(), set, 1, "o", pgfence.ErrInvalidIdentifier},
		{"EmptyTablePart", withTable("s", ""), set, 1, "o", pgfence.ErrInvalidIdentifier},
		{"FourTableParts", withTable("a", "b", "c", "d"), set, 1, "o", pgfence.ErrInvalidIdentifier},
		{"EmptyKeyColumn", withKey(""), set, 1, "o", pgfence.ErrInvalidIdentifier},
		{"KeyColumnIsFence", withKey(pgfence.TokenColumn), set, 1, "o", pgfence.ErrInvalidIdentifier},
		{"SetKeyColumn", good, map[string]any{"id": 2}, 1, "o", pgfence.ErrInvalidIdentifier},
		{"SetTokenColumn", good, map[string]any{pgfence.TokenColumn: 2}, 1, "o", pgfence.ErrInvalidIdentifier},
		{"SetOwnerColumn", good, map[string]any{pgfence.OwnerColumn: "x"}, 1, "o", pgfence.ErrInvalidIdentifier},
		{"SetScopeColumn", good, map[string]any{pgfence.ScopeColumn: "x"}, 1, "o", pgfence.ErrInvalidIdentifier},
		{"KeyColumnIsScope", withKey(pgfence.ScopeColumn), set, 1, "o", pgfence.ErrInvalidIdentifier},
		{"SetEmptyColumn", good, map[string]any{"": 2}, 1, "o", pgfence.ErrInvalidIdentifier},
		{"SetBadUTF8Column", good, map[string]any{"\xff": 2}, 1, "o", pgfence.ErrInvalidIdentifier},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for name, write := range map[string]func(context.Context, pgfence.DBTX, pgfence.Row, map[string]any, fence.Holder) error{
				"Update": pgfence.FencedUpdate, "Upsert": pgfence.FencedUpsert,
			} {
				db := &untouchable{}
				err := write(t.Context(), db, tt.row, tt.set, fence.Holder{Token: tt.token, Owner: tt.owner})
				require.ErrorIs(t, err, tt.want, name)
				require.NotErrorIs(t, err, fence.ErrStaleToken, name)
				require.Zero(t, db.calls, "%s: the database was touched", name)
			}
		})
	}
}

// TestFencedUpdateWaitsForConcurrentWriter: under READ COMMITTED an older
// holder's update waits for the newer holder's transaction and then applies
// the rule to the row as it was left; the StaleTokenError reports the
// newer token, not the one in the older holder's snapshot.
func TestFencedUpdateWaitsForConcurrentWriter(t *testing.T) {
	t.Parallel()
	tb := newTable(t)

	run := func(t *testing.T, id string, upsert, commitNewer bool) error {
		ctx := t.Context()
		write := pgfence.FencedUpdate
		if upsert {
			write = pgfence.FencedUpsert
		} else {
			tb.insert(t, id)
			require.NoError(t, pgfence.FencedUpdate(ctx, tb.pool, tb.row(id), nil, fence.Holder{Token: 10, Owner: "first"}))
		}
		return writeBehindNewer(t, tb.pool, "the older writer never waited for the row", commitNewer,
			func(ctx context.Context, tx pgx.Tx) error {
				return write(ctx, tx, tb.row(id), map[string]any{"value": "newer"}, fence.Holder{Token: 50, Owner: "newer"})
			},
			func(ctx context.Context, tx pgx.Tx) error {
				return write(ctx, tx, tb.row(id), map[string]any{"value": "older"}, fence.Holder{Token: 40, Owner: "older"})
			})
	}

	for _, upsert := range []bool{false, true} {
		name := map[bool]string{false: "Update", true: "Upsert"}[upsert]
		t.Run(name+"/NewerCommitsOlderRefused", func(t *testing.T) {
			t.Parallel()
			id := name + "-commit"
			err := run(t, id, upsert, true)
			var stale *fence.StaleTokenError
			require.ErrorAs(t, err, &stale)
			require.Equal(t, fence.Token(50), stale.Current)
			require.Equal(t, "newer", tb.get(t, id).Value)
		})
		t.Run(name+"/NewerRollsBackOlderAccepted", func(t *testing.T) {
			t.Parallel()
			id := name + "-rollback"
			require.NoError(t, run(t, id, upsert, false))
			require.Equal(t, "older", tb.get(t, id).Value)
		})
	}
}

// TestFencedWritesSerializationFailureIsRetryable: under SERIALIZABLE a
// row changed after the transaction's snapshot fails the write with
// SQLSTATE 40001, matched by ErrRetryable, and running the transaction
// again succeeds.
func TestFencedWritesSerializationFailureIsRetryable(t *testing.T) {
	t.Parallel()
	tb := newTable(t)
	for name, write := range map[string]func(context.Context, pgfence.DBTX, pgfence.Row, map[string]any, fence.Holder) error{
		"Update": pgfence.FencedUpdate, "Upsert": pgfence.FencedUpsert,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			id := "serial-" + name
			if name == "Update" {
				tb.insert(t, id)
			}
			tx, err := tb.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
			require.NoError(t, err)
			defer tx.Rollback(context.Background()) //nolint:errcheck // test cleanup
			var n int
			require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM `+tb.ident.Sanitize()).Scan(&n)) // takes the snapshot

			require.NoError(t, write(ctx, tb.pool, tb.row(id), map[string]any{"value": "other"}, fence.Holder{Token: 1, Owner: "other"})) // commits after it

			err = write(ctx, tx, tb.row(id), map[string]any{"value": "mine"}, fence.Holder{Token: 2, Owner: "mine"})
			require.ErrorIs(t, err, pgfence.ErrRetryable)
			require.NotErrorIs(t, err, fence.ErrStaleToken)
			var pgErr *pgconn.PgError
			require.ErrorAs(t, err, &pgErr)
			require.Equal(t, "40001", pgErr.Code)

			require.NoError(t, tx.Rollback(ctx))
			require.NoError(t, pgx.BeginTxFunc(ctx, tb.pool, pgx.TxOptions{IsoLevel: pgx.Serializable}, func(tx pgx.Tx) error {
				return write(ctx, tx, tb.row(id), map[string]any{"value": "mine"}, fence.Holder{Token: 2, Owner: "mine"})
			}))
			require.Equal(t, "mine", tb.get(t, id).Value)
		})
	}
}

func TestFencedUpsertFirstWriteInserts(t *testing.T) {
	t.Parallel()
	tb := newTable(t)
	ctx := t.Context()
	row := tb.row("new")

	require.NoError(t, pgfence.FencedUpsert(ctx, tb.pool, row, map[string]any{"value": "v5", "note": "first"}, fence.Holder{Token: 5, Owner: "a"}))
	require.Equal(t, rowState{"v5", ptr("first"), ptr[int64](5), ptr("a")}, tb.get(t, "new"))

	err := pgfence.FencedUpsert(ctx, tb.pool, row, map[string]any{"value": "lost"}, fence.Holder{Token: 4, Owner: "b"})
	var stale *fence.StaleTokenError
	require.ErrorAs(t, err, &stale)
	require.Equal(t, fence.StaleTokenError{Resource: tb.ident[0] + ".items[id=new]", Presented: 4, Current: 5}, *stale)
	require.ErrorIs(t, pgfence.FencedUpsert(ctx, tb.pool, row, map[string]any{"value": "lost"}, fence.Holder{Token: 5, Owner: "b"}), fence.ErrStaleToken)

	require.NoError(t, pgfence.FencedUpsert(ctx, tb.pool, row, map[string]any{"value": "v5b"}, fence.Holder{Token: 5, Owner: "a"}))
	require.NoError(t, pgfence.FencedUpsert(ctx, tb.pool, row, map[string]any{"value": "v6"}, fence.Holder{Token: 6, Owner: "b"}))
	require.Equal(t, rowState{"v6", ptr("first"), ptr[int64](6), ptr("b")}, tb.get(t, "new"))

	// A pre-existing row with NULL fence columns takes any token.
	tb.insert(t, "old")
	require.NoError(t, pgfence.FencedUpsert(ctx, tb.pool, tb.row("old"), map[string]any{"value": "v1"}, fence.Holder{Token: 1, Owner: "a"}))
	require.Equal(t, "v1", tb.get(t, "old").Value)
}

func TestFencedUpsertNeedsUniqueKey(t *testing.T) {
	t.Parallel()
	tb := newTable(t)
	row := pgfence.Row{Table: tb.ident, KeyColumn: "value", Key: "x"}
	err := pgfence.FencedUpsert(t.Context(), tb.pool, row, nil, fence.Holder{Token: 1, Owner: "a"})
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "42P10", pgErr.Code) // no unique constraint matching ON CONFLICT
	require.NotErrorIs(t, err, pgfence.ErrRetryable)
	require.Contains(t, err.Error(), fmt.Sprintf("%s.items[value=x]", tb.ident[0]))
}

func TestIsRetryable(t *testing.T) {
	t.Parallel()
	commitFailure := fmt.Errorf("commit: %w", &pgconn.PgError{Code: "40001"})
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"SerializationFailureFromCommit", commitFailure, true},
		{"Deadlock", &pgconn.PgError{Code: "40P01"}, true},
		{"WrappedByPgfence", fmt.Errorf("x: %w", pgfence.ErrRetryable), true},
		{"UniqueViolation", &pgconn.PgError{Code: "23505"}, false},
		{"Stale", &fence.StaleTokenError{Resource: "r", Presented: 1, Current: 2}, false},
		{"RowNotFound", pgfence.ErrRowNotFound, false},
		{"Nil", nil, false},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, pgfence.IsRetryable(tt.err), tt.name)
	}
}

func TestFencedWritesManyColumns(t *testing.T) {
	t.Parallel()
	// More set columns than the statement cache keys: built every time.
	pool := testPool(t)
	schema := newSchema(t)
	tbl := pgx.Identifier{schema, "wide"}
	var cols string
	set := map[string]any{}
	for i := range 12 {
		cols += fmt.Sprintf(", c%d int", i)
		set[fmt.Sprintf("c%d", i)] = i
	}
	_, err := pool.Exec(t.Context(), `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()+`;
CREATE TABLE `+tbl.Sanitize()+` (id int PRIMARY KEY`+cols+`, fence_token bigint, fence_owner text, fence_scope text)`)
	require.NoError(t, err)
	row := pgfence.Row{Table: tbl, KeyColumn: "id", Key: 1}

	require.NoError(t, pgfence.FencedUpsert(t.Context(), pool, row, set, fence.Holder{Token: 1, Owner: "a"}))
	set["c11"] = 110
	require.NoError(t, pgfence.FencedUpdate(t.Context(), pool, row, set, fence.Holder{Token: 2, Owner: "a"}))
	require.ErrorIs(t, pgfence.FencedUpdate(t.Context(), pool, row, set, fence.Holder{Token: 1, Owner: "b"}), fence.ErrStaleToken)
	var c0, c11 int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT c0, c11 FROM `+tbl.Sanitize()).Scan(&c0, &c11))
	require.Equal(t, 0, c0)
	require.Equal(t, 110, c11)
}
