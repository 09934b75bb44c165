package pgtest

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
)

// Shared is a test package's one pool, opened by the first test that needs
// it and closed by Main before the goroutine leak check.
type Shared struct {
	// MaxConns sizes the pool (default 16): enough for the package's
	// concurrent writers, not so many that parallel packages exhaust the
	// shared server.
	MaxConns int32

	once sync.Once
	pool *pgxpool.Pool
	err  error

	mu     sync.Mutex
	levels map[string]*pgxpool.Pool // PoolAt's pools, by isolation
}

// Isolations are the values of default_transaction_isolation the
// conformance suites run the Postgres stores at: every store must work
// whatever level a database or role defaults to.
var Isolations = []string{"read committed", "repeatable read", "serializable"}

// LevelMaxConns caps the size of each PoolAt pool (8).
const LevelMaxConns = 8

// PoolAt returns a pool whose connections default to isolation (a value
// of default_transaction_isolation, one of Isolations), set per
// connection as a runtime parameter (never ALTER DATABASE: the server is
// shared). Every statement and every transaction that does not name its
// level runs at isolation. One pool per level, opened by the first test
// that asks, closed by Main, with at most LevelMaxConns connections: the
// server is shared by parallel packages, and a suite at three levels must
// not hold three times the connections.
func (s *Shared) PoolAt(t testing.TB, isolation string) *pgxpool.Pool {
	t.Helper()
	s.Pool(t) // skips, or fails without a server
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.levels[isolation]; p != nil {
		return p
	}
	cfg := s.pool.Config().Copy()
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = isolation
	cfg.MaxConns = min(cfg.MaxConns, LevelMaxConns)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err == nil {
		var got string
		if err = p.QueryRow(ctx, `SHOW default_transaction_isolation`).Scan(&got); err == nil && got != isolation {
			err = fmt.Errorf("default_transaction_isolation is %q, want %q", got, isolation)
		}
		if err != nil {
			p.Close()
		}
	}
	if err != nil {
		t.Fatalf("pgtest: pool at isolation %q: %v", isolation, err)
	}
	if s.levels == nil {
		s.levels = map[string]*pgxpool.Pool{}
	}
	s.levels[isolation] = p
	return p
}

// Pool returns the shared pool. It fails the test when PostgreSQL does not
// answer at URL(), or skips it with HOLDFAST_SKIP_INTEGRATION=1.
func (s *Shared) Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	if os.Getenv("HOLDFAST_SKIP_INTEGRATION") == "1" {
		t.Skip("HOLDFAST_SKIP_INTEGRATION=1")
	}
	s.once.Do(func() {
		cfg, err := pgxpool.ParseConfig(URL())
		if err != nil {
			s.err = fmt.Errorf("DATABASE_URL: %w", err)
			return
		}
		cfg.MaxConns = s.MaxConns
		if cfg.MaxConns == 0 {
			cfg.MaxConns = 16
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if s.pool, s.err = pgxpool.NewWithConfig(ctx, cfg); s.err == nil {
			s.err = s.pool.Ping(ctx)
		}
	})
	if s.err != nil {
		t.Fatalf("pgtest: no PostgreSQL at %s (run scripts/services.sh, or set HOLDFAST_SKIP_INTEGRATION=1): %v", URL(), s.err)
	}
	return s.pool
}

// Schema returns a fresh schema name starting with prefix and drops the
// schema (if anything created it) when the test ends.
func (s *Shared) Schema(t testing.TB, prefix string) string {
	t.Helper()
	return Schema(t, s.Pool(t), prefix)
}

// Schema returns a fresh schema name starting with prefix and drops the
// schema (if anything created it) on pool when the test ends: register it
// after the pool's close, so that it runs first.
func Schema(t testing.TB, pool *pgxpool.Pool, prefix string) string {
	t.Helper()
	schema := fmt.Sprintf("%s%016x", prefix, rand.Uint64())
	t.Cleanup(func() {
		// t.Context is already canceled when cleanups run.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// OwnPool returns a pool of the test's own at URL(), closed when the test
// ends, for a test that must not share the package's pool (its own size,
// runtime parameters or tracer: configure, if not nil, adjusts the config
// before the pool is made). It fails the test when PostgreSQL does not
// answer (Require), or skips it with HOLDFAST_SKIP_INTEGRATION=1.
func OwnPool(t testing.TB, configure func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	Require(t)
	cfg, err := pgxpool.ParseConfig(URL())
	if err != nil {
		t.Fatalf("pgtest: DATABASE_URL: %v", err)
	}
	if configure != nil {
		configure(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pgtest: pool at %s: %v", URL(), err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Main runs the package's tests, closes the shared pool (its health-check
// goroutine) and then checks for leaked goroutines. Call it from TestMain.
func Main(m *testing.M, s *Shared) {
	code := m.Run()
	if s.pool != nil {
		s.pool.Close()
	}
	for _, p := range s.levels {
		p.Close()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// WaitForLock waits (up to 10 s, polling every 5 ms) until the backend
// with pid waits on a lock, as a writer blocked behind another
// transaction's row lock does, and fails the test with what when it never
// does.
func WaitForLock(t testing.TB, pool *pgxpool.Pool, pid uint32, what string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var waiting bool
		err := pool.QueryRow(context.Background(),
			`SELECT coalesce(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&waiting)
		return err == nil && waiting
	}, 10*time.Second, 5*time.Millisecond, what)
}

// EachIsolation runs run as a parallel subtest of t, named after the
// level, once per level of Isolations.
func EachIsolation(t *testing.T, run func(t *testing.T, isolation string)) {
	t.Helper()
	for _, iso := range Isolations {
		t.Run(iso, func(t *testing.T) {
			t.Parallel()
			run(t, iso)
		})
	}
}
