package pgfence_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// The guard keeps one fence per (resource, scope): the tokens of two
// leases writing one resource are never compared, and a stale holder of
// one lease is still refused by its own lease's fence.
func TestCheckKeepsOneFencePerScope(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	a := fence.Holder{Scope: "settle|tenant-a", Token: 1780000000000900, Owner: "replica-1"}
	bb := fence.Holder{Scope: "settle|tenant-b", Token: 1780000000000100, Owner: "replica-2"}
	require.NoError(t, b.guard.Check(ctx, b.pool, "/v1/charges", a))
	require.NoError(t, b.guard.Check(ctx, b.pool, "/v1/charges", bb), "a smaller token of another lease is not stale")
	require.NoError(t, b.guard.Check(ctx, b.pool, "/v1/charges", fence.Holder{Token: 5, Owner: "replica-3"}), "scope \"\" is a scope of its own")

	frozen := fence.Holder{Scope: "settle|tenant-a", Token: 1780000000000800, Owner: "replica-3"}
	err := b.guard.Check(ctx, b.pool, "/v1/charges", frozen)
	var stale *fence.StaleTokenError
	require.ErrorAs(t, err, &stale)
	require.Equal(t, fence.StaleTokenError{Resource: "/v1/charges", Scope: "settle|tenant-a", Presented: frozen.Token, Current: a.Token}, *stale)

	for _, h := range []fence.Holder{a, bb, {Token: 5, Owner: "replica-3"}} {
		tok, owner, err := b.guard.Current(ctx, b.pool, "/v1/charges", h.Scope)
		require.NoError(t, err)
		require.Equal(t, h.Token, tok, h.Scope)
		require.Equal(t, h.Owner, owner, h.Scope)
	}
	tok, _, err := b.guard.Current(ctx, b.pool, "/v1/charges", "settle|tenant-c")
	require.NoError(t, err)
	require.Equal(t, fence.None, tok, "a scope never written")
}

// A guard table made by the first migration (primary key resource) is
// brought to (resource, scope) by Migrate; its rows keep their token in
// scope "", and Migrate stays idempotent.
func TestMigrateAddsScopeToAnExistingGuardTable(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	ctx := t.Context()
	schema := newSchema(t)
	table := pgx.Identifier{schema, pgfence.DefaultTable}.Sanitize()
	_, err := pool.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()+`;
CREATE TABLE `+table+` (
    resource   text        PRIMARY KEY,
    token      bigint      NOT NULL CHECK (token > 0),
    owner      text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now());
INSERT INTO `+table+` (resource, token, owner) VALUES ('old', 40, 'before-upgrade')`)
	require.NoError(t, err)

	guard, err := pgfence.New(pgfence.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, guard.Migrate(ctx, pool))
	require.NoError(t, guard.Migrate(ctx, pool), "idempotent")

	var pk []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(a.attname::text ORDER BY k.n)
  FROM pg_constraint c
  CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, n)
  JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
 WHERE c.conrelid = $1::regclass AND c.contype = 'p'`, table).Scan(&pk))
	require.Equal(t, []string{"resource", "scope"}, pk)

	tok, owner, err := guard.Current(ctx, pool, "old", "")
	require.NoError(t, err)
	require.Equal(t, fence.Token(40), tok)
	require.Equal(t, "before-upgrade", owner)
	require.ErrorIs(t, guard.Check(ctx, pool, "old", fence.Holder{Token: 39, Owner: "x"}), fence.ErrStaleToken)
	require.NoError(t, guard.Check(ctx, pool, "old", fence.Holder{Scope: "job", Token: 39, Owner: "x"}))
}

// A row of the caller's table has one token, so one scope: the scope of
// the write that set it. A write under another scope is refused with
// ErrScopeMismatch, never judged by comparing two leases' tokens, so a
// stale holder of lease A does not get through because lease B wrote last.
func TestFencedWriteRefusesAnotherScope(t *testing.T) {
	t.Parallel()
	tb := newTable(t)
	ctx := t.Context()
	for name, write := range map[string]func(context.Context, pgfence.DBTX, pgfence.Row, map[string]any, fence.Holder) error{
		"Update": pgfence.FencedUpdate, "Upsert": pgfence.FencedUpsert,
	} {
		id := "scoped-" + name
		tb.insert(t, id)
		row := tb.row(id)
		a := fence.Holder{Scope: "lease-a", Token: 100, Owner: "a1"}
		require.NoError(t, write(ctx, tb.pool, row, map[string]any{"value": "a100"}, a), name)
		requireScope(t, tb, id, "lease-a")

		err := write(ctx, tb.pool, row, map[string]any{"value": "b"}, fence.Holder{Scope: "lease-b", Token: 500, Owner: "b1"})
		require.ErrorIs(t, err, pgfence.ErrScopeMismatch, name)
		require.NotErrorIs(t, err, fence.ErrStaleToken, name)
		require.ErrorContains(t, err, `of scope "lease-a", the write's of scope "lease-b"`)

		err = write(ctx, tb.pool, row, map[string]any{"value": "stale"}, fence.Holder{Scope: "lease-a", Token: 99, Owner: "a0"})
		var stale *fence.StaleTokenError
		require.ErrorAs(t, err, &stale, name)
		require.Equal(t, "lease-a", stale.Scope)
		require.Equal(t, fence.Token(100), stale.Current)
		require.NoError(t, write(ctx, tb.pool, row, map[string]any{"value": "a101"}, fence.Holder{Scope: "lease-a", Token: 101, Owner: "a2"}), name)
		require.Equal(t, "a101", tb.get(t, id).Value)
	}

	// A row with a token but no scope (written before fence_scope existed)
	// is judged by its token alone, and records the scope that passes.
	_, err := tb.pool.Exec(ctx, `INSERT INTO `+tb.ident.Sanitize()+` (id, fence_token, fence_owner) VALUES ('legacy', 50, 'old')`)
	require.NoError(t, err)
	require.ErrorIs(t, pgfence.FencedUpdate(ctx, tb.pool, tb.row("legacy"), nil, fence.Holder{Scope: "lease-a", Token: 49, Owner: "a"}), fence.ErrStaleToken)
	require.NoError(t, pgfence.FencedUpdate(ctx, tb.pool, tb.row("legacy"), nil, fence.Holder{Scope: "lease-a", Token: 51, Owner: "a"}))
	requireScope(t, tb, "legacy", "lease-a")
}

func requireScope(t *testing.T, tb *table, id, want string) {
	t.Helper()
	var scope *string
	require.NoError(t, tb.pool.QueryRow(t.Context(), `SELECT fence_scope FROM `+tb.ident.Sanitize()+` WHERE id = $1`, id).Scan(&scope))
	require.NotNil(t, scope)
	require.Equal(t, want, *scope)
}

// A typed nil pool in the DBTX interface is refused with ErrInvalidOptions
// instead of panicking on first use.
func TestTypedNilPoolIsInvalidConfig(t *testing.T) {
	t.Parallel()
	var pool *pgxpool.Pool
	g, err := pgfence.New(pgfence.Options{})
	require.NoError(t, err)
	h := fence.Holder{Scope: "s", Token: 1, Owner: "o"}
	row := pgfence.Row{Table: pgx.Identifier{"t"}, KeyColumn: "id", Key: 1}
	require.ErrorIs(t, g.Migrate(t.Context(), pool), pgfence.ErrInvalidOptions)
	require.ErrorIs(t, g.Check(t.Context(), pool, "r", fence.Holder{Scope: "bad\x00", Token: 1, Owner: "o"}), pgfence.ErrInvalidScope)
	require.ErrorIs(t, g.Check(t.Context(), pool, "r", h), pgfence.ErrInvalidOptions)
	_, _, err = g.Current(t.Context(), pool, "r", "s")
	require.ErrorIs(t, err, pgfence.ErrInvalidOptions)
	require.ErrorIs(t, pgfence.FencedUpdate(t.Context(), pool, row, nil, h), pgfence.ErrInvalidOptions)
	require.ErrorIs(t, pgfence.FencedUpsert(t.Context(), pool, row, nil, h), pgfence.ErrInvalidOptions)
}

// Migrate on an up-to-date guard table takes no lock that waits for its
// writers: replicas run Migrate at start-up, and an exclusive lock request
// queued behind one open fenced transaction would stall every other writer
// of the table until that transaction ends.
func TestMigrateOfAnUpToDateTableDoesNotWaitForWriters(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()

	writer, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer writer.Rollback(context.Background()) //nolint:errcheck // test cleanup
	require.NoError(t, b.guard.Check(ctx, writer, "settlement", fence.Holder{Scope: "settle", Token: 7, Owner: "replica-1"}))

	migrated := make(chan error, 1)
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { migrated <- b.guard.Migrate(mctx, b.pool) }()
	select {
	case err := <-migrated:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		var waiting string
		_ = b.pool.QueryRow(ctx, `SELECT coalesce(string_agg(query, '; '), '') FROM pg_stat_activity
 WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&waiting)
		cancel()
		<-migrated
		t.Fatalf("Migrate waited 20s behind an open fenced transaction; waiting: %.200s", waiting)
	}
	require.NoError(t, writer.Commit(ctx))
}

// A writer of the version before scopes, still running beside the new one,
// must not be judged against the scope "" row while the new version raises
// the lease's own scope: after Migrate its Check statement fails (no unique
// constraint on resource alone, SQLSTATE 42P10), so it writes nothing.
func TestPreScopeCheckFailsAfterMigrate(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	guard := pgx.Identifier{b.schema, pgfence.DefaultTable}.Sanitize()
	// Guard.Check's statement before migration 002.
	old := `INSERT INTO ` + guard + ` AS g (resource, token, owner, updated_at)
VALUES ($1, $2, $3, now())
ON CONFLICT (resource) DO UPDATE
   SET token = EXCLUDED.token, owner = EXCLUDED.owner, updated_at = now()
 WHERE g.token < EXCLUDED.token
    OR (g.token = EXCLUDED.token AND g.owner = EXCLUDED.owner)
RETURNING token`
	require.NoError(t, b.guard.Check(ctx, b.pool, "settlement", fence.Holder{Scope: "settle", Token: 900, Owner: "new"}))
	var raised int64
	err := b.pool.QueryRow(ctx, old, "settlement", int64(800), "old").Scan(&raised)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "42P10", pgErr.Code, pgErr.Message)
	var rows int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM `+guard).Scan(&rows))
	require.Equal(t, 1, rows, "the old writer wrote nothing")
}

// Migrate upgrades a guard table that writers of the version before scopes
// are writing at that moment: concurrent Migrates take turns, no writer
// deadlocks or sees a half-migrated table, every write that committed before
// the upgrade is kept as scope "" (the highest one is the fence), and every
// old write after it fails with 42P10 instead of landing.
func TestMigrateUnderLiveWritersOfTheOldVersion(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	ctx := t.Context()
	schema := newSchema(t)
	table := pgx.Identifier{schema, pgfence.DefaultTable}.Sanitize()
	_, err := pool.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()+`;
CREATE TABLE `+table+` (
    resource   text        PRIMARY KEY,
    token      bigint      NOT NULL CHECK (token > 0),
    owner      text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now())`)
	require.NoError(t, err)
	old := `INSERT INTO ` + table + ` AS g (resource, token, owner, updated_at)
VALUES ($1, $2, $3, now())
ON CONFLICT (resource) DO UPDATE
   SET token = EXCLUDED.token, owner = EXCLUDED.owner, updated_at = now()
 WHERE g.token < EXCLUDED.token
    OR (g.token = EXCLUDED.token AND g.owner = EXCLUDED.owner)
RETURNING token`

	const writers, perWriter = 6, 100000 // each stops 20 writes after the upgrade
	var (
		next      atomic.Int64
		committed atomic.Int64 // writes accepted before the upgrade
		mu        sync.Mutex
		maxTok    int64
		maxOwner  string
		wg        sync.WaitGroup
	)
	upgraded := make(chan struct{})
	outcomes := make([][]string, writers) // per writer: "ok", "refused", "42P10", in order
	for w := range writers {
		wg.Go(func() {
			owner := fmt.Sprintf("old-%d", w)
			after := 0
			for i := 0; i < perWriter && after < 20; i++ {
				select {
				case <-upgraded:
					after++ // a few writes after the upgrade, then stop
				default:
				}
				tok := next.Add(1)
				var raised int64
				err := pool.QueryRow(ctx, old, "settlement", tok, owner).Scan(&raised)
				var pgErr *pgconn.PgError
				switch {
				case err == nil:
					outcomes[w] = append(outcomes[w], "ok")
					committed.Add(1)
					mu.Lock()
					if tok > maxTok {
						maxTok, maxOwner = tok, owner
					}
					mu.Unlock()
				case errors.Is(err, pgx.ErrNoRows):
					outcomes[w] = append(outcomes[w], "refused")
				case errors.As(err, &pgErr):
					outcomes[w] = append(outcomes[w], pgErr.Code)
				default:
					outcomes[w] = append(outcomes[w], err.Error())
				}
			}
		})
	}
	testwait.Until(t, 30*time.Second, "old writers committing", func() bool { return committed.Load() >= 50 })

	guard, err := pgfence.New(pgfence.Options{Schema: schema})
	require.NoError(t, err)
	migrateErrs := make([]error, 3)
	var mg sync.WaitGroup
	for i := range migrateErrs {
		mg.Go(func() { migrateErrs[i] = guard.Migrate(ctx, pool) })
	}
	mg.Wait()
	close(upgraded)
	wg.Wait()
	for i, err := range migrateErrs {
		require.NoError(t, err, "Migrate %d", i)
	}

	for w, outs := range outcomes {
		failed := false
		for i, o := range outs {
			switch o {
			case "ok", "refused":
				require.False(t, failed, "writer %d: write %d landed after the upgrade refused one: %v", w, i, outs)
			case "42P10":
				failed = true
			default:
				t.Fatalf("writer %d: write %d: unexpected outcome %q", w, i, o)
			}
		}
		require.True(t, failed, "writer %d never met the upgraded table: %v", w, outs)
	}
	tok, owner, err := guard.Current(ctx, pool, "settlement", "")
	require.NoError(t, err)
	require.Equal(t, fence.Token(maxTok), tok, "the highest write before the upgrade is the scope \"\" fence")
	require.Equal(t, maxOwner, owner)
	require.ErrorIs(t, guard.Check(ctx, pool, "settlement", fence.Holder{Token: tok - 1, Owner: "late"}), fence.ErrStaleToken)
	require.NoError(t, guard.Check(ctx, pool, "settlement", fence.Holder{Scope: "settle", Token: 1, Owner: "new"}))
	t.Logf("%d old writes committed before the upgrade, fence %d", committed.Load(), tok)
}
