package httpfence_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// The store tests run against a real PostgreSQL (DATABASE_URL) and a real
// Redis (REDIS_URL), plus miniredis and the in-memory stores. An unreachable
// service fails the tests that need it unless HOLDFAST_SKIP_INTEGRATION=1.

// shared is the package's one pool, closed by TestMain before the leak check.
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

// testPool returns the shared pool, failing the test when PostgreSQL is
// unreachable (skipping it with HOLDFAST_SKIP_INTEGRATION=1). The pool is
// small: the database is shared with other packages' tests, and requests
// beyond it queue, which the race tests tolerate.
func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	if os.Getenv("HOLDFAST_SKIP_INTEGRATION") == "1" {
		t.Skip("HOLDFAST_SKIP_INTEGRATION=1")
	}
	shared.once.Do(func() {
		cfg, err := pgxpool.ParseConfig(pgtest.URL())
		if err != nil {
			shared.err = err
			return
		}
		cfg.MaxConns = 16
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if shared.pool, shared.err = pgxpool.NewWithConfig(ctx, cfg); shared.err == nil {
			shared.err = shared.pool.Ping(ctx)
		}
	})
	if shared.err != nil {
		t.Fatalf("no PostgreSQL at %s (run scripts/services.sh, or set HOLDFAST_SKIP_INTEGRATION=1): %v", pgtest.URL(), shared.err)
	}
	return shared.pool
}

// newSchema returns a fresh schema name, dropped when the test ends.
func newSchema(t testing.TB) string {
	t.Helper()
	pool := testPool(t)
	schema := fmt.Sprintf("httpfence_test_%016x", rand.Uint64())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// stores is one backend's pair of stores for a test. advance lets d pass
// for the backend's expiry: miniredis does not expire keys on its own, the
// others do (advance is then a no-op and the test polls).
type stores struct {
	store   httpfence.Store
	fence   httpfence.FenceStore
	advance func(d time.Duration)
}

type backend struct {
	name string
	new  func(t testing.TB) stores
}

func backends() []backend {
	return []backend{
		{"memory", func(testing.TB) stores {
			return stores{httpfence.NewMemoryStore(), httpfence.NewMemoryFence(), func(time.Duration) {}}
		}},
		{"redis", func(t testing.TB) stores {
			rdb := redistest.Real(t)
			prefix := redistest.Prefix(t, rdb)
			return stores{httpfence.NewRedisStore(rdb, prefix+"idem:"), httpfence.NewRedisFence(rdb, prefix+"fence:"), func(time.Duration) {}}
		}},
		{"miniredis", func(t testing.TB) stores {
			mr := miniredis.RunT(t)
			rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
			t.Cleanup(func() { _ = rdb.Close() })
			return stores{httpfence.NewRedisStore(rdb, "t:idem:"), httpfence.NewRedisFence(rdb, "t:fence:"), mr.FastForward}
		}},
		{"postgres", func(t testing.TB) stores {
			pool := testPool(t)
			schema := newSchema(t)
			st, err := httpfence.NewPostgresStore(pool, schema)
			require.NoError(t, err)
			require.NoError(t, st.Migrate(context.Background()))
			f, err := httpfence.NewPostgresFence(pool, pgfence.Config{Schema: schema})
			require.NoError(t, err)
			require.NoError(t, f.Migrate(context.Background()))
			return stores{st, f, func(time.Duration) {}}
		}},
	}
}

// eachBackend runs fn as a parallel subtest per backend.
func eachBackend(t *testing.T, fn func(t *testing.T, s stores)) {
	t.Helper()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			fn(t, b.new(t))
		})
	}
}

// eventually polls cond on the test's goroutine (so cond may use require)
// every few milliseconds until it holds, failing the test after 10 s.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		<-tick.C
	}
}
