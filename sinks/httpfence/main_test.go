package httpfence_test

import (
	"context"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/miniconf"
	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/sinks/httpfence/httpfencetest"
	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore"
	"github.com/holdfast-go/holdfast/sinks/httpfence/pgstore"
	"github.com/holdfast-go/holdfast/sinks/httpfence/redisstore"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// The store tests run against a real PostgreSQL (DATABASE_URL) and a real
// Redis (REDIS_URL), plus miniredis and the in-memory stores. An unreachable
// service fails the tests that need it unless HOLDFAST_SKIP_INTEGRATION=1.

// shared is the package's one pool; small, because the database is shared
// with other packages' tests and requests beyond it queue.
var shared = pgtest.Shared{MaxConns: 16}

func TestMain(m *testing.M) { pgtest.Main(m, &shared) }

func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return shared.Pool(t)
}

// newSchema returns a fresh schema name, dropped when the test ends.
func newSchema(t testing.TB) string {
	t.Helper()
	return shared.Schema(t, "httpfence_test_")
}

// stores is one backend's pair of stores for a test. advance lets d pass
// for the backend's expiry: miniredis does not expire keys on its own, the
// others do (advance is then a no-op and the test polls).
type stores struct {
	store   idemstore.Store
	fence   idemstore.FenceStore
	advance func(d time.Duration)
}

type backend struct {
	name string
	new  func(t testing.TB) stores
}

func backends() []backend {
	return []backend{
		{"memory", func(testing.TB) stores {
			return stores{httpfencetest.NewMemoryStore(), httpfencetest.NewMemoryFence(), func(time.Duration) {}}
		}},
		{"redis", func(t testing.TB) stores {
			rdb := redistest.Real(t)
			prefix := redistest.Prefix(t, rdb)
			return stores{newRedisStore(t, rdb, prefix+"idem:"), newRedisFence(t, rdb, prefix+"fence:"), func(time.Duration) {}}
		}},
		{"miniredis", func(t testing.TB) stores {
			mr := miniredis.RunT(t)
			miniconf.Register(mr)
			rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
			t.Cleanup(func() { _ = rdb.Close() })
			return stores{newRedisStore(t, rdb, "t:idem:"), newRedisFence(t, rdb, "t:fence:"), mr.FastForward}
		}},
		{"postgres", func(t testing.TB) stores { return pgStores(t, testPool(t)) }},
	}
}

// pgBackendsAtEveryIsolation are the Postgres stores on pools whose
// connections default to each isolation level a database may be set to
// (pgtest.Isolations): the conformance suites run on each.
func pgBackendsAtEveryIsolation() []backend {
	var out []backend
	for _, iso := range pgtest.Isolations {
		out = append(out, backend{"postgres/" + iso, func(t testing.TB) stores { return pgStores(t, shared.PoolAt(t, iso)) }})
	}
	return out
}

// pgStores returns a migrated Store and Fence on pool, in a fresh schema.
func pgStores(t testing.TB, pool *pgxpool.Pool) stores {
	t.Helper()
	schema := newSchema(t)
	st, err := pgstore.NewStore(pool, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, st.Migrate(context.Background()))
	f, err := pgstore.NewFence(pool, pgfence.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, f.Migrate(context.Background()))
	return stores{st, f, func(time.Duration) {}}
}

// newRedisStore and newRedisFence build the Redis stores on rdb.
func newRedisStore(t testing.TB, rdb redis.UniversalClient, prefix string) *redisstore.Store {
	t.Helper()
	s, err := redisstore.NewStore(rdb, redisstore.Options{Prefix: prefix})
	require.NoError(t, err)
	return s
}

func newRedisFence(t testing.TB, rdb redis.UniversalClient, prefix string) *redisstore.Fence {
	t.Helper()
	f, err := redisstore.NewFence(rdb, redisstore.Options{Prefix: prefix})
	require.NoError(t, err)
	return f
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

// waitLimit bounds the tests' waits for an expiry (testwait.Until).
const waitLimit = 10 * time.Second
