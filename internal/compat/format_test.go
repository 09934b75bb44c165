package compat_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/formatver"
	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/pglease"
	"github.com/holdfast-go/holdfast/lease/redislease"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/pgledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
	"github.com/holdfast-go/holdfast/sinks/httpfence/pgstore"
	"github.com/holdfast-go/holdfast/sinks/httpfence/redisstore"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
	"github.com/holdfast-go/holdfast/sinks/redisfence"
)

var holder = fence.Holder{Scope: "compat", Token: 1780000000000001, Owner: "compat-owner"}

// redisStore is one Redis store under test: its name in markers, and its
// first use (a write) on rdb under prefix.
type redisStore struct {
	name  string
	fixed string // the store's fixed prefix, "" when it takes one
	use   func(ctx context.Context, t *testing.T, rdb redis.UniversalClient, prefix string) error
}

var redisStores = []redisStore{
	{name: "lease/redislease", use: func(ctx context.Context, t *testing.T, rdb redis.UniversalClient, prefix string) error {
		b, err := redislease.NewBackend(rdb, redislease.Options{Prefix: prefix})
		require.NoError(t, err)
		_, err = b.Acquire(ctx, "job", "owner-1", time.Minute)
		return err
	}},
	{name: "scheduler/ledger/redisledger", use: func(ctx context.Context, t *testing.T, rdb redis.UniversalClient, prefix string) error {
		l, err := redisledger.New(rdb, redisledger.Options{Prefix: prefix})
		require.NoError(t, err)
		return l.SetPaused(ctx, "job", true)
	}},
	{name: "sinks/httpfence/redisstore.Store", use: func(ctx context.Context, t *testing.T, rdb redis.UniversalClient, prefix string) error {
		s, err := redisstore.NewStore(rdb, redisstore.Options{Prefix: prefix})
		require.NoError(t, err)
		_, err = s.Begin(ctx, "key", "fingerprint", time.Minute)
		return err
	}},
	{name: "sinks/httpfence/redisstore.Fence", use: func(ctx context.Context, t *testing.T, rdb redis.UniversalClient, prefix string) error {
		f, err := redisstore.NewFence(rdb, redisstore.Options{Prefix: prefix})
		require.NoError(t, err)
		return f.Accept(ctx, "resource", holder)
	}},
	{name: "sinks/redisfence", fixed: redisfence.FencePrefix, use: func(ctx context.Context, t *testing.T, rdb redis.UniversalClient, _ string) error {
		w, err := redisfence.New(rdb)
		require.NoError(t, err)
		return w.Set(ctx, "resource", "v", holder, 0)
	}},
}

// redisFor returns a Redis and a prefix for s: the shared real Redis and
// a fresh prefix, or, for a store with a fixed prefix (whose marker is
// one per Redis), a redis-server of the test's own.
func redisFor(t *testing.T, s redisStore) (redis.UniversalClient, string) {
	if s.fixed != "" {
		return redisproc.Start(t).Client(t), s.fixed
	}
	rdb := redistest.Real(t)
	return rdb, redistest.Prefix(t, rdb)
}

func requireFormatError(t *testing.T, err error, store, found string) {
	t.Helper()
	require.ErrorIs(t, err, fence.ErrUnknownFormat)
	var fe *fence.FormatError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, store, fe.Store)
	require.Equal(t, found, fe.Found)
	require.Equal(t, formatver.Marker(store), fe.Want)
	require.Equal(t, "holdfast "+store+" format 1", fe.Want)
}

// Each Redis store writes its marker on first use and refuses a marker of
// another format, or another store's, before writing anything.
func TestRedisStoresMarkAndCheckTheirFormat(t *testing.T) {
	t.Parallel()
	for _, s := range redisStores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()

			rdb, prefix := redisFor(t, s)
			require.NoError(t, s.use(ctx, t, rdb, prefix))
			require.Equal(t, "holdfast "+s.name+" format 1", rdb.Get(ctx, prefix+"format").Val(), "the marker written on first use")
			require.NoError(t, s.use(ctx, t, rdb, prefix), "a second build of the same format")

			for _, foreign := range []string{
				"holdfast " + s.name + " format 2",         // a newer build's
				"holdfast lease/redislease-other format 1", // another store's keys under the prefix
				"something else",                           // foreign data at the marker key
			} {
				rdb, prefix := redisFor(t, s)
				require.NoError(t, rdb.Set(ctx, prefix+"format", foreign, 0).Err())
				err := s.use(ctx, t, rdb, prefix)
				requireFormatError(t, err, s.name, foreign)
				keys, err := rdb.Keys(ctx, prefix+"*").Result()
				require.NoError(t, err)
				require.Equal(t, []string{prefix + "format"}, keys, "nothing written beside the marker")
			}

			rdb, prefix = redisFor(t, s)
			require.NoError(t, rdb.HSet(ctx, prefix+"format", "f", "v").Err())
			requireFormatError(t, s.use(ctx, t, rdb, prefix), s.name, "(a Redis hash)")
		})
	}
}

// Two stores given one prefix by mistake refuse each other (their keys
// could meet): the second one's first use fails.
func TestRedisStoresRefuseAnotherStoresPrefix(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	takes := redisStores[:4] // the stores that take a prefix
	for _, first := range takes {
		for _, second := range takes {
			if first.name == second.name {
				continue
			}
			rdb := redistest.Real(t)
			prefix := redistest.Prefix(t, rdb)
			require.NoError(t, first.use(ctx, t, rdb, prefix))
			requireFormatError(t, second.use(ctx, t, rdb, prefix), second.name, formatver.Marker(first.name))
		}
	}
}

// The stores' reads (an operator's views: redislease Inspect and List,
// redisfence Current, what holdfast lease ls/show and fence get read)
// check the marker without writing it. A read aimed at the wrong prefix
// (lease ls --prefix <the ledger's>) wrote the lease marker there, and
// the ledger of that prefix then refused every claim for good (a fresh
// user's trial). A marker of another format or store still refuses them.
func TestRedisReadsWriteNoMarker(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	reads := []struct {
		name  string
		fixed string
		read  func(rdb redis.UniversalClient, prefix string) error
	}{
		{"lease/redislease", "", func(rdb redis.UniversalClient, prefix string) error {
			b, err := redislease.NewBackend(rdb, redislease.Options{Prefix: prefix})
			require.NoError(t, err)
			if _, err := b.Inspect(ctx, "job"); err != nil {
				return err
			}
			_, err = b.List(ctx, "*", 10)
			return err
		}},
		{"scheduler/ledger/redisledger", "", func(rdb redis.UniversalClient, prefix string) error {
			l, err := redisledger.New(rdb, redisledger.Options{Prefix: prefix})
			require.NoError(t, err)
			if _, err := l.Paused(ctx, "job"); err != nil {
				return err
			}
			if _, _, err := l.Get(ctx, ledger.Slot{Job: "job", At: time.Unix(1780000000, 0)}); err != nil {
				return err
			}
			if _, err := l.List(ctx, "job", "", time.Unix(0, 0), time.Now(), 10); err != nil {
				return err
			}
			old := time.Now().Add(-ledger.PruneMargin - time.Minute) // a cutoff the ledger takes
			if _, _, err := l.PrunePreview(ctx, old, 10); err != nil {
				return err
			}
			_, err = l.Prune(ctx, old)
			return err
		}},
		{"sinks/redisfence", redisfence.FencePrefix, func(rdb redis.UniversalClient, _ string) error {
			w, err := redisfence.New(rdb)
			require.NoError(t, err)
			_, _, err = w.Current(ctx, "resource", "scope")
			return err
		}},
	}
	for _, r := range reads {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			rdb, prefix := redisFor(t, redisStore{name: r.name, fixed: r.fixed})
			require.NoError(t, r.read(rdb, prefix))
			n, err := rdb.Exists(ctx, prefix+"format").Result()
			require.NoError(t, err)
			require.Zero(t, n, "a read writes no marker")
			if r.fixed == "" {
				// Another store of that prefix still starts: no marker of
				// the reader's there (lease ls --prefix <the ledger's>,
				// ledger prune --ledger-prefix <the leases'>).
				if r.name == "lease/redislease" {
					l, err := redisledger.New(rdb, redisledger.Options{Prefix: prefix})
					require.NoError(t, err)
					require.NoError(t, l.SetPaused(ctx, "job", true))
				} else {
					b, err := redislease.NewBackend(rdb, redislease.Options{Prefix: prefix})
					require.NoError(t, err)
					g, err := b.Acquire(ctx, "job", "owner-1", time.Minute)
					require.NoError(t, err)
					require.True(t, g.Acquired)
				}
			}

			rdb, prefix = redisFor(t, redisStore{name: r.name, fixed: r.fixed})
			require.NoError(t, rdb.Set(ctx, prefix+"format", "holdfast "+r.name+" format 2", 0).Err())
			requireFormatError(t, r.read(rdb, prefix), r.name, "holdfast "+r.name+" format 2")
			rdb, prefix = redisFor(t, redisStore{name: r.name, fixed: r.fixed})
			require.NoError(t, rdb.HSet(ctx, prefix+"format", "f", "v").Err())
			requireFormatError(t, r.read(rdb, prefix), r.name, "(a Redis hash)")
		})
	}
}

// A failed check is not remembered: a store that met an error (here a
// marker of another format, then removed) checks again at its next use.
func TestFormatCheckIsRetriedAfterAFailure(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rdb := redistest.Real(t)
	prefix := redistest.Prefix(t, rdb)
	b, err := redislease.NewBackend(rdb, redislease.Options{Prefix: prefix})
	require.NoError(t, err)
	require.NoError(t, rdb.Set(ctx, prefix+"format", "holdfast lease/redislease format 2", 0).Err())
	_, err = b.Acquire(ctx, "job", "owner-1", time.Minute)
	require.ErrorIs(t, err, fence.ErrUnknownFormat)
	require.NoError(t, rdb.Del(ctx, prefix+"format").Err())
	g, err := b.Acquire(ctx, "job", "owner-1", time.Minute)
	require.NoError(t, err)
	require.True(t, g.Acquired)
	require.Equal(t, formatver.Marker("lease/redislease"), rdb.Get(ctx, prefix+"format").Val())
}

// pgStore is one Postgres store under test: its marked table and its
// first use (Migrate, then a write) in schema.
type pgStore struct {
	name, table string
	migrate     func(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string) error
	// open makes the store and returns its use (a write), to call as
	// often as a test needs, on that one store.
	open func(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string) func() error
}

// use is a first use of a new store of s.
func (s pgStore) use(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string) error {
	return s.open(ctx, t, pool, schema)()
}

var pgStores = []pgStore{
	{name: "lease/pglease", table: "leases",
		migrate: func(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string) error {
			b, err := pglease.New(pool, pglease.Options{Schema: schema})
			require.NoError(t, err)
			return b.Migrate(ctx)
		},
		open: func(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string) func() error {
			b, err := pglease.New(pool, pglease.Options{Schema: schema})
			require.NoError(t, err)
			return func() error { _, err := b.Acquire(ctx, "job", "owner-1", time.Minute); return err }
		}},
	{name: "scheduler/ledger/pgledger", table: "job_runs",
		migrate: func(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string) error {
			l, err := pgledger.New(pool, pgledger.Options{Schema: schema})
			require.NoError(t, err)
			return l.Migrate(ctx)
		},
		open: func(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string) func() error {
			l, err := pgledger.New(pool, pgledger.Options{Schema: schema})
			require.NoError(t, err)
			return func() error { return l.SetPaused(ctx, "job", true) }
		}},
	{name: "sinks/pgfence", table: pgfence.DefaultTable,
		migrate: func(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string) error {
			g, err := pgfence.New(pgfence.Options{Schema: schema})
			require.NoError(t, err)
			return g.Migrate(ctx, pool)
		},
		open: func(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string) func() error {
			g, err := pgfence.New(pgfence.Options{Schema: schema})
			require.NoError(t, err)
			return func() error {
				return pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
					return g.Check(ctx, tx, "resource", holder)
				})
			}
		}},
	{name: "sinks/httpfence/pgstore", table: "idempotency_keys",
		migrate: func(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string) error {
			s, err := pgstore.NewStore(pool, pgstore.Options{Schema: schema})
			require.NoError(t, err)
			return s.Migrate(ctx)
		},
		open: func(ctx context.Context, t *testing.T, pool *pgxpool.Pool, schema string) func() error {
			s, err := pgstore.NewStore(pool, pgstore.Options{Schema: schema})
			require.NoError(t, err)
			return func() error { _, err := s.Begin(ctx, "key", "fingerprint", time.Minute); return err }
		}},
}

func rowCount(t *testing.T, pool *pgxpool.Pool, table string) int {
	var n int
	require.NoError(t, pool.QueryRow(t.Context(), `SELECT count(*) FROM `+table).Scan(&n))
	return n
}

// Each Postgres store's Migrate marks its table, and a store meeting a
// table marked with another format refuses it, in Migrate (under the
// migration lock, before any DDL) and on first use, before writing.
func TestPostgresStoresMarkAndCheckTheirFormat(t *testing.T) {
	eachPgStore(t, func(t *testing.T, ctx context.Context, pool *pgxpool.Pool, s pgStore, schema, table string) {
		require.NoError(t, s.migrate(ctx, t, pool, schema))
		var comment string
		require.NoError(t, pool.QueryRow(ctx, `SELECT obj_description($1::regclass, 'pg_class')`, table).Scan(&comment))
		require.Equal(t, "holdfast "+s.name+" format 1", comment)
		require.NoError(t, s.use(ctx, t, pool, schema))
		require.NoError(t, s.migrate(ctx, t, pool, schema), "Migrate again on its own format")

		for _, foreign := range []string{"holdfast " + s.name + " format 2", "the orders table, kept by billing"} {
			schema := pgtest.Schema(t, pool, "compat_")
			table := pgx.Identifier{schema, s.table}.Sanitize()
			require.NoError(t, s.migrate(ctx, t, pool, schema))
			commentTable(ctx, t, pool, table, foreign)
			requireFormatError(t, s.use(ctx, t, pool, schema), s.name, foreign)
			require.Zero(t, rowCount(t, pool, table), "nothing written")
			requireFormatError(t, s.migrate(ctx, t, pool, schema), s.name, foreign)
		}
	})
}

// eachPgStore runs check for every Postgres store, in parallel subtests,
// each with a fresh schema and the store's table in it (quoted).
func eachPgStore(t *testing.T, check func(t *testing.T, ctx context.Context, pool *pgxpool.Pool, s pgStore, schema, table string)) {
	t.Parallel()
	pool := shared.Pool(t)
	for _, s := range pgStores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			schema := pgtest.Schema(t, pool, "compat_")
			check(t, t.Context(), pool, s, schema, pgx.Identifier{schema, s.table}.Sanitize())
		})
	}
}

// commentTable sets the comment of table (quoted), where the stores keep
// their format marker.
func commentTable(ctx context.Context, t *testing.T, pool *pgxpool.Pool, table, comment string) {
	t.Helper()
	_, err := pool.Exec(ctx, `COMMENT ON TABLE `+table+` IS '`+comment+`'`)
	require.NoError(t, err)
}

// The check is one statement per store, on its first use only.
func TestPostgresFormatIsCheckedOnce(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := shared.Pool(t)
	schema := pgtest.Schema(t, pool, "compat_")
	b, err := pglease.New(pool, pglease.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, b.Migrate(ctx))
	g, err := b.Acquire(ctx, "job", "owner-1", time.Minute)
	require.NoError(t, err)
	require.True(t, g.Acquired)
	// A marker changed under a running store is not seen again: the
	// check guards a store's start, not every statement.
	commentTable(ctx, t, pool, pgx.Identifier{schema, "leases"}.Sanitize(), "holdfast lease/pglease format 2")
	_, err = b.Acquire(ctx, "job2", "owner-1", time.Minute)
	require.NoError(t, err)
	b2, err := pglease.New(pool, pglease.Options{Schema: schema})
	require.NoError(t, err)
	_, err = b2.Acquire(ctx, "job3", "owner-1", time.Minute)
	require.True(t, errors.Is(err, fence.ErrUnknownFormat), "a new store checks: %v", err)
}

// A store used before its table exists does not remember that first check
// as passed: once another build made the table and marked it with another
// format, the same store's next use refuses it (a fresh user's trial: a
// Guard and a Backend first used on a database without their tables went
// on to use format-2 tables). A table without a comment still passes.
func TestPostgresStoreUsedBeforeItsTableChecksAgain(t *testing.T) {
	eachPgStore(t, func(t *testing.T, ctx context.Context, pool *pgxpool.Pool, s pgStore, schema, table string) {
		use := s.open(ctx, t, pool, schema) // one store, used before and after its table is made
		err := use()
		require.Error(t, err, "no table yet")
		require.NotErrorIs(t, err, fence.ErrUnknownFormat)

		// Another build makes the table and marks it format 2.
		require.NoError(t, s.migrate(ctx, t, pool, schema))
		foreign := "holdfast " + s.name + " format 2"
		commentTable(ctx, t, pool, table, foreign)
		requireFormatError(t, use(), s.name, foreign)
		require.Zero(t, rowCount(t, pool, table), "nothing written")

		// A table without a comment (made before markers) passes.
		_, err = pool.Exec(ctx, `COMMENT ON TABLE `+table+` IS NULL`)
		require.NoError(t, err)
		require.NoError(t, use())
	})
}

// pglease's Release and Renew check the stored format first, as every
// other entry point does: on a fresh backend they ran their UPDATE on a
// table of another format (a fresh user's trial).
func TestPgleaseReleaseAndRenewCheckTheFormat(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := shared.Pool(t)
	schema := pgtest.Schema(t, pool, "compat_")
	table := pgx.Identifier{schema, "leases"}.Sanitize()
	first, err := pglease.New(pool, pglease.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, first.Migrate(ctx))
	g, err := first.Acquire(ctx, "job", "owner-1", time.Minute)
	require.NoError(t, err)
	require.True(t, g.Acquired)
	foreign := "holdfast lease/pglease format 2"
	commentTable(ctx, t, pool, table, foreign)

	b, err := pglease.New(pool, pglease.Options{Schema: schema})
	require.NoError(t, err)
	held := leasedriver.Held{Name: "job", Owner: "owner-1", TTL: time.Minute}
	requireFormatError(t, b.Release(ctx, held), "lease/pglease", foreign)
	for _, err := range b.Renew(ctx, []leasedriver.Held{held, held}) {
		requireFormatError(t, err, "lease/pglease", foreign)
	}
	var owner string
	require.NoError(t, pool.QueryRow(ctx, `SELECT owner FROM `+table+` WHERE name = 'job'`).Scan(&owner))
	require.Equal(t, "owner-1", owner, "the row is as it was: nothing written")
}
