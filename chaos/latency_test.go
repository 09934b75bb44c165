package chaos

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/faultproxy"
	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/lease"
)

// proxiedPool returns a pool of its own whose connections to PostgreSQL
// go through a fault proxy, closed when the test ends.
func proxiedPool(t *testing.T, maxConns int32) (*pgxpool.Pool, *faultproxy.Proxy) {
	t.Helper()
	shared.Pool(t) // skips or fails without PostgreSQL
	cfg, err := pgxpool.ParseConfig(pgtest.URL())
	require.NoError(t, err)
	target := net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
	if cfg.ConnConfig.Host == "localhost" || cfg.ConnConfig.Host == "" {
		target = net.JoinHostPort("127.0.0.1", strconv.Itoa(int(cfg.ConnConfig.Port)))
	}
	proxy, err := faultproxy.New(target)
	require.NoError(t, err)
	host, port, err := net.SplitHostPort(proxy.Addr())
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(p)
	cfg.ConnConfig.Fallbacks = nil
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		pool.Close()
		_ = proxy.Close()
	})
	return pool, proxy
}

// proxiedRedis returns a client of srv through a fault proxy.
func proxiedRedis(t *testing.T, srv *redisproc.Server) (*redis.Client, *faultproxy.Proxy) {
	t.Helper()
	proxy, err := faultproxy.New(srv.Addr())
	require.NoError(t, err)
	opts := &redis.Options{Addr: proxy.Addr()}
	fastClient(opts)
	rdb := redis.NewClient(opts)
	t.Cleanup(func() {
		_ = rdb.Close()
		_ = proxy.Close()
	})
	return rdb, proxy
}

// TestLatencyOnTheHoldersPostgresConnection: holder A begins its write,
// and its Postgres connection then holds every byte 2 x TTL (faultproxy
// delay), while its Redis connection stalls, so A loses the lease. B
// acquires and writes directly. A's statement reaches Postgres after B's
// commit and must be refused. Control: the sink without its fence check,
// which accepts A's write over B's.
func TestLatencyOnTheHoldersPostgresConnection(t *testing.T) {
	t.Parallel()
	const (
		name = "sink-latency"
		ttl  = 300 * time.Millisecond
	)
	n := trials(300)
	r := newReport(name, n, controls(n))
	s, pool := newSink(t, "chaos_latency_")
	srv := redisproc.Start(t)
	rdbA, redisProxy := proxiedRedis(t, srv)
	poolA, pgProxy := proxiedPool(t, 2)
	ca, err := lease.New(rdbA, lease.Options{Prefix: "chaos:"})
	require.NoError(t, err)
	cb, err := lease.New(srv.Client(t), lease.Options{Prefix: "chaos:", RetryMax: 20 * time.Millisecond})
	require.NoError(t, err)
	bar := newProgress(name, n+r.controls)

	var stale, late, refused int
	trial := func(i int, guarded bool) (staleN int, lateWrite bool, refusedA bool) {
		ctx := trialCtx(t, 30*time.Second)
		lname, resource := fmt.Sprintf("latency-%d", i), fmt.Sprintf("latency-%d-%t", i, guarded)
		la, err := acquire(ctx, ca, lname, ttl)
		require.NoError(t, err)
		tx, err := poolA.Begin(ctx) // BEGIN is through before the delay
		require.NoError(t, err)

		pgProxy.SetDelay(faultproxy.Upstream, 2*ttl)
		redisProxy.Stall()
		sent := time.Now()
		resA := make(chan error, 1)
		go func() {
			wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resA <- s.writeIn(wctx, tx, resource, holderOf(la), "a", guarded)
		}()

		lb, err := acquire(ctx, cb, lname, ttl)
		require.NoError(t, err, "B acquires once A's key expired")
		require.Greater(t, lb.Token(), la.Token())
		require.NoError(t, s.write(ctx, pool, resource, holderOf(lb), "b", guarded))
		lateWrite = time.Since(sent) < 2*ttl // B committed before A's statement arrives
		pgProxy.SetDelay(faultproxy.Upstream, 0)

		errA := <-resA
		redisProxy.Resume()
		if errA != nil {
			require.True(t, isStale(errA), "A's write: %v", errA)
			refusedA = true
		}
		testutilDone(t, la.Done(), "A lost its lease")
		// B renews every 100 ms; a test process starved for a TTL loses
		// the lease, which is not what this scenario is about.
		if err := lb.Release(ctx); err != nil {
			require.ErrorIs(t, err, lease.ErrNotHeld)
		}
		_ = la.Release(ctx)
		es, err := s.effects(ctx, pool, resource)
		require.NoError(t, err)
		bar.step()
		return staleAccepted(es), lateWrite, refusedA
	}
	for i := range n {
		sa, lw, rf := trial(i, true)
		stale += sa
		if lw {
			late++
		}
		if rf {
			refused++
		}
	}
	for i := range r.controls {
		if sa, _, _ := trial(n+i, false); sa > 0 {
			r.fired++
		}
	}
	r.violations = stale
	r.add("stale_accepted", stale)
	r.ratio("late_write_after_successor", late, n)
	r.ratio("stale_refused", refused, n)
	r.finish(t)
	require.GreaterOrEqual(t, late, mostTrials(n), "the delayed write must land after the successor's in all trials but 5%% (at least one)")
}
