package lease_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/faultproxy"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
)

// Issue 11, part 3, on real redis-server processes. A grant that reaches
// the caller at or after TTL - Drift(TTL) is refused with
// *leasedriver.SlowAcquireError, gives the caller no lease and no token, and deletes
// its key. The fake-clock tests (faketime_test.go) put the boundary to
// the nanosecond; these show it on real sockets.

// slowTTL and slowBy are the figures: a 2 s TTL, a 2.1 s answer.
const (
	slowTTL = 2 * time.Second
	slowBy  = 2100 * time.Millisecond
)

// proxied returns a test-owned redis-server, a client of it through a
// fault proxy (one connection, opened before any fault), and a direct
// client to look at its keys.
func proxied(t *testing.T, configure ...func(*redis.Options)) (*faultproxy.Proxy, *redis.Client, *redis.Client) {
	t.Helper()
	srv := redisproc.Start(t)
	p, err := faultproxy.New(srv.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	opts := &redis.Options{Addr: p.Addr(), PoolSize: 1, MaxRetries: -1}
	for _, f := range configure {
		f(opts)
	}
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	require.NoError(t, rdb.Ping(context.Background()).Err())
	return p, rdb, srv.Client(t)
}

// warmScripts loads the acquire and release scripts into the server's
// cache, so that an acquire is one command (no NOSCRIPT and EVAL).
func warmScripts(t *testing.T, c *lease.Client) {
	t.Helper()
	warm, err := c.TryAcquire(context.Background(), "warm", slowTTL)
	require.NoError(t, err)
	require.NoError(t, warm.Release(context.Background()))
}

func requireSlow(t *testing.T, l *lease.Lease, err error, name string) *leasedriver.SlowAcquireError {
	t.Helper()
	require.Nil(t, l, "a slow grant hands out no lease")
	require.ErrorIs(t, err, lease.ErrSlowAcquire)
	var se *leasedriver.SlowAcquireError
	require.ErrorAs(t, err, &se)
	require.Equal(t, name, se.Name)
	require.Equal(t, slowTTL, se.TTL)
	require.GreaterOrEqual(t, se.Took, slowBy, "Took is the whole acquisition")
	return se
}

// The reply takes 2.1 s (the case): the key the server set has
// expired by the time the grant arrives, and the grant is refused.
func TestSlowReplyFromRealRedisIsRefused(t *testing.T) {
	t.Parallel()
	p, rdb, direct := proxied(t)
	c, err := lease.New(rdb, lease.Options{Prefix: procPrefix})
	require.NoError(t, err)
	warmScripts(t, c)
	p.SetDelay(faultproxy.Downstream, slowBy)
	l, err := c.TryAcquire(context.Background(), "slow-reply", slowTTL)
	p.SetDelay(faultproxy.Downstream, 0)
	se := requireSlow(t, l, err, "slow-reply")
	t.Logf("slow reply: %v", se)
	leaseKey, _ := lease.KeysOf(c, "slow-reply")
	n, err := direct.Exists(context.Background(), leaseKey).Result()
	require.NoError(t, err)
	require.Zero(t, n)
}

// The request takes 2.1 s to reach the server, the reply none: the server
// sets the key 2.1 s after the call started, and it would live for 2 s
// more. The refused acquisition deletes it before returning.
func TestSlowRequestToRealRedisIsRefusedAndLeavesNoKey(t *testing.T) {
	t.Parallel()
	p, rdb, direct := proxied(t)
	c, err := lease.New(rdb, lease.Options{Prefix: procPrefix})
	require.NoError(t, err)
	warmScripts(t, c)

	l, err := behindSlowRequest(t, p, func() (*lease.Lease, error) {
		return c.TryAcquire(context.Background(), "slow-request", slowTTL)
	})
	se := requireSlow(t, l, err, "slow-request")
	leaseKey, _ := lease.KeysOf(c, "slow-request")
	n, err := direct.Exists(context.Background(), leaseKey).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the slow acquisition's key is gone before its TTL (set %v after the start, lives %v)", se.Took, slowTTL)
}

// A blocking Acquire whose grant comes too late does not fail the caller,
// who asked to wait: the slow grant is undone, and the next try, fast,
// takes the lease.
func TestBlockingAcquireTriesAgainAfterASlowGrantOnRealRedis(t *testing.T) {
	t.Parallel()
	p, rdb, direct := proxied(t)
	c, err := lease.New(rdb, lease.Options{Prefix: procPrefix})
	require.NoError(t, err)
	warmScripts(t, c)

	wait, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := behindSlowRequest(t, p, func() (*lease.Lease, error) {
		return c.Acquire(wait, "slow-then-fast", slowTTL)
	})
	require.NoError(t, err, "the try after the slow grant takes the lease")
	defer func() { require.NoError(t, l.Release(context.Background())) }()
	require.NoError(t, l.Err())
	leaseKey, _ := lease.KeysOf(c, "slow-then-fast")
	owner, err := direct.Get(context.Background(), leaseKey).Result()
	require.NoError(t, err)
	require.Equal(t, l.Holder().Owner, owner, "the key holds the lease handed out")
}

// behindSlowRequest runs acquire while the proxy holds the first request
// it sends for slowBy: only that request is delayed, since once the proxy
// holds it, what follows (a compare-and-delete, a next try) goes through
// at once.
func behindSlowRequest(t *testing.T, p *faultproxy.Proxy, acquire func() (*lease.Lease, error)) (*lease.Lease, error) {
	t.Helper()
	type result struct {
		l   *lease.Lease
		err error
	}
	before := p.Received(faultproxy.Upstream)
	p.SetDelay(faultproxy.Upstream, slowBy)
	got := make(chan result, 1)
	go func() {
		l, err := acquire()
		got <- result{l, err}
	}()
	testwait.Until(t, 10*time.Second, "the acquire reached the proxy", func() bool {
		return p.Received(faultproxy.Upstream) > before
	})
	p.SetDelay(faultproxy.Upstream, 0)
	r := <-got
	return r.l, r.err
}

// An acquire whose reply times out may still have taken the key: it
// deletes it, so the name is not blocked for the TTL (a minute here). Only
// the acquire's reply is late (held 1 s, past the 200 ms ReadTimeout);
// what follows goes through at once.
func TestTimedOutAcquireOnRealRedisLeavesNoKey(t *testing.T) {
	t.Parallel()
	p, rdb, direct := proxied(t, func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond })
	c, err := lease.New(rdb, lease.Options{Prefix: procPrefix})
	require.NoError(t, err)
	warmScripts(t, c) // or the timed-out EVALSHA would be a NOSCRIPT
	before := p.Received(faultproxy.Downstream)
	p.SetDelay(faultproxy.Downstream, time.Second)
	type result struct {
		l   *lease.Lease
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := c.TryAcquire(context.Background(), "timed-out", time.Minute)
		got <- result{l, err}
	}()
	testwait.Until(t, 10*time.Second, "the acquire's reply reached the proxy", func() bool {
		return p.Received(faultproxy.Downstream) > before
	})
	p.SetDelay(faultproxy.Downstream, 0)
	r := <-got
	require.Nil(t, r.l)
	require.Error(t, r.err)
	require.NotErrorIs(t, r.err, lease.ErrNotAcquired)
	var nerr net.Error
	require.True(t, errors.As(r.err, &nerr) && nerr.Timeout(), "a read timeout: %v", r.err)
	leaseKey, _ := lease.KeysOf(c, "timed-out")
	n, err := direct.Exists(context.Background(), leaseKey).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the timed-out acquisition's key is deleted before the call returns")
	l, err := c.TryAcquire(context.Background(), "timed-out", time.Minute)
	require.NoError(t, err, "the name is free at once")
	require.NoError(t, l.Release(context.Background()))
}

// holdFirstScript is a go-redis hook that holds the first script command
// (EVALSHA or EVAL) sent after arm for d before sending it: a request
// that is slow to reach a Sentinel-managed primary or a Cluster node.
type holdFirstScript struct {
	d     time.Duration
	armed atomic.Bool
}

func (h *holdFirstScript) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdFirstScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.isScript(cmd) && h.armed.CompareAndSwap(true, false) {
			<-time.After(h.d)
		}
		return next(ctx, cmd)
	}
}

func (h *holdFirstScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *holdFirstScript) isScript(cmd redis.Cmder) bool {
	name := strings.ToLower(cmd.Name())
	return name == "evalsha" || name == "eval"
}

// slowAcquireOnTopology runs the slow-request case on a Sentinel or Cluster
// client of its own: the same built-in backend, through another
// redis.UniversalClient.
func slowAcquireOnTopology(t *testing.T, rdb redis.UniversalClient, direct redis.UniversalClient, name string) {
	ctx := context.Background()
	hook := &holdFirstScript{d: slowBy}
	rdb.AddHook(hook)
	c, err := lease.New(rdb, lease.Options{Prefix: procPrefix})
	require.NoError(t, err)
	warm, err := c.TryAcquire(ctx, name, slowTTL) // the script cache of name's node
	require.NoError(t, err)
	require.NoError(t, warm.Release(ctx))
	hook.armed.Store(true)
	l, err := c.TryAcquire(ctx, name, slowTTL)
	se := requireSlow(t, l, err, name)
	leaseKey, _ := lease.KeysOf(c, name)
	n, err := direct.Exists(ctx, leaseKey).Result()
	require.NoError(t, err)
	require.Zero(t, n, "the slow acquisition's key is gone (set %v after the start, lives %v)", se.Took, slowTTL)
}
