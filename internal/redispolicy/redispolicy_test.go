package redispolicy_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redispolicy"
	"github.com/holdfast-go/holdfast/internal/redisproc"
)

// replyError is a server's error reply, as go-redis returns one.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

func TestErrorsMatchTheirSentinels(t *testing.T) {
	t.Parallel()
	perr := &redispolicy.PolicyError{Addr: "127.0.0.1:1", Policy: "allkeys-lru", MaxMemory: 1 << 20, Option: "x.Options.Eviction"}
	require.ErrorIs(t, perr, redispolicy.ErrEvictionPolicy)
	require.Contains(t, perr.Error(), "CONFIG SET maxmemory-policy noeviction")
	require.Contains(t, perr.Error(), "x.Options.Eviction.AllowEviction")
	require.Contains(t, perr.Error(), `"allkeys-lru" (at 127.0.0.1:1, maxmemory 1048576)`)

	reply := replyError("NOPERM User default has no permissions to run the 'config|get' command")
	uerr := &redispolicy.UnknownError{Addr: "127.0.0.1:1", Option: "x.Options.Eviction", Err: reply}
	require.ErrorIs(t, uerr, redispolicy.ErrPolicyUnknown)
	require.ErrorIs(t, uerr, reply)
	require.Contains(t, uerr.Error(), "x.Options.Eviction.Policy")

	oom := replyError("OOM command not allowed when used memory > 'maxmemory'.")
	err := redispolicy.MemoryFull(fmt.Errorf("acquire: %w", oom))
	require.ErrorIs(t, err, redispolicy.ErrMemoryFull)
	require.ErrorIs(t, err, oom)
	require.Contains(t, err.Error(), "redis memory is full")
	require.Same(t, err, redispolicy.MemoryFull(err), "wrapped once")
	other := replyError("ERR something else")
	require.Equal(t, error(other), redispolicy.MemoryFull(other))
	require.NoError(t, redispolicy.MemoryFull(nil))
	require.Equal(t, errors.New("OOM but not a reply"), redispolicy.MemoryFull(errors.New("OOM but not a reply")))
}

func TestValidateAcceptsRedisPolicies(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"", "noeviction", "allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"} {
		require.NoError(t, redispolicy.Options{Policy: p}.Validate(), p)
	}
	for _, p := range []string{"no-eviction", "NOEVICTION", "lru", " noeviction"} {
		require.Error(t, redispolicy.Options{Policy: p}.Validate(), p)
	}
}

// Concurrent first checks share one CONFIG GET; once passed, a check sends
// nothing; a refusal is not cached.
func TestCheckReadsOnceAndCachesOnlyAPass(t *testing.T) {
	t.Parallel()
	srv := redisproc.Start(t, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")
	var configs atomic.Int64
	rdb := srv.Client(t)
	rdb.AddHook(countConfig{&configs})

	c := redispolicy.New(rdb, redispolicy.Options{}, "x.Options.Eviction")
	require.ErrorIs(t, c.Check(t.Context()), redispolicy.ErrEvictionPolicy)
	require.ErrorIs(t, c.Check(t.Context()), redispolicy.ErrEvictionPolicy)
	require.Equal(t, int64(2), configs.Load(), "a refusal is read again")

	admin := srv.Client(t)
	require.NoError(t, admin.ConfigSet(t.Context(), "maxmemory-policy", "noeviction").Err())
	configs.Store(0)
	var wg sync.WaitGroup
	errs := make([]error, 16)
	for i := range errs {
		wg.Go(func() { errs[i] = c.Check(t.Context()) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, int64(1), configs.Load(), "concurrent first checks share one read")
	require.NoError(t, c.Check(t.Context()))
	require.Equal(t, int64(1), configs.Load(), "a pass is cached")
	require.False(t, c.Evicting())

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	fresh := redispolicy.New(rdb, redispolicy.Options{}, "x")
	require.ErrorIs(t, fresh.Check(ctx), context.Canceled)
	require.NoError(t, fresh.Check(t.Context()), "an I/O error is not cached")
}

// A passed check is trusted for RecheckInterval, then read again: a
// policy changed with CONFIG SET to one that evicts is refused from the
// next check after it (it was trusted for the Checker's life, so a
// Redis switched to allkeys-lru went on holding leases and fences). A
// re-read that fails on I/O keeps the pass, and the next check reads
// again. Control: without the re-read, the check after the interval
// passes.
func TestCheckReadsAgainAfterRecheckInterval(t *testing.T) {
	t.Parallel()
	srv := redisproc.Start(t)
	var configs atomic.Int64
	rdb := srv.Client(t)
	rdb.AddHook(countConfig{&configs})
	var now atomic.Int64 // ns since the test's origin
	origin := time.Now()
	clock := func() time.Time { return origin.Add(time.Duration(now.Load())) }

	c := redispolicy.NewWithClock(rdb, redispolicy.Options{}, "x.Options.Eviction", clock)
	require.NoError(t, c.Check(t.Context()))
	require.Equal(t, int64(1), configs.Load())

	admin := srv.Client(t)
	require.NoError(t, admin.ConfigSet(t.Context(), "maxmemory", "64mb").Err())
	require.NoError(t, admin.ConfigSet(t.Context(), "maxmemory-policy", "allkeys-lru").Err())
	now.Store(int64(redispolicy.RecheckInterval - time.Millisecond))
	require.NoError(t, c.Check(t.Context()), "trusted within the interval")
	require.Equal(t, int64(1), configs.Load())

	now.Store(int64(redispolicy.RecheckInterval))
	err := c.Check(t.Context())
	var perr *redispolicy.PolicyError
	require.ErrorAs(t, err, &perr, "read again after the interval")
	require.Equal(t, "allkeys-lru", perr.Policy)
	require.Equal(t, int64(2), configs.Load())
	require.ErrorIs(t, c.Check(t.Context()), redispolicy.ErrEvictionPolicy, "a refusal is not cached")
	require.Equal(t, int64(3), configs.Load())

	require.NoError(t, admin.ConfigSet(t.Context(), "maxmemory-policy", "noeviction").Err())
	require.NoError(t, c.Check(t.Context()))
	require.Equal(t, int64(4), configs.Load())

	now.Add(int64(redispolicy.RecheckInterval))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.NoError(t, c.Check(ctx), "a re-read that fails on I/O keeps the pass")
	tried := configs.Load()
	require.NoError(t, c.Check(t.Context()))
	require.Equal(t, tried+1, configs.Load(), "and the next check reads again")
	require.NoError(t, c.Check(t.Context()))
	require.Equal(t, tried+1, configs.Load(), "trusted again for an interval")

	declared := redispolicy.NewWithClock(rdb, redispolicy.Options{Policy: redispolicy.NoEviction}, "x", clock)
	require.NoError(t, declared.Check(t.Context()))
	now.Add(2 * int64(redispolicy.RecheckInterval))
	require.NoError(t, declared.Check(t.Context()))
	require.Equal(t, tried+1, configs.Load(), "a declared policy is never read")
}

// On a Cluster, every master is read: one evicting master refuses.
func TestCheckReadsEveryClusterMaster(t *testing.T) {
	t.Parallel()
	cl := redisproc.StartCluster(t, 3)
	rdb := cl.Client(t)
	last := cl.Nodes[len(cl.Nodes)-1]
	admin := last.Client(t)
	require.NoError(t, admin.ConfigSet(t.Context(), "maxmemory", "64mb").Err())
	require.NoError(t, admin.ConfigSet(t.Context(), "maxmemory-policy", "volatile-lru").Err())

	err := redispolicy.New(rdb, redispolicy.Options{}, "x").Check(t.Context())
	var perr *redispolicy.PolicyError
	require.ErrorAs(t, err, &perr)
	require.Equal(t, last.Addr(), perr.Addr)
	require.Equal(t, "volatile-lru", perr.Policy)

	allowed := redispolicy.New(rdb, redispolicy.Options{AllowEviction: true}, "x")
	require.NoError(t, allowed.Check(t.Context()))
	require.True(t, allowed.Evicting())
	n, err := allowed.Evictions(t.Context())
	require.NoError(t, err)
	require.Zero(t, n)
}

// countConfig counts the CONFIG commands a client sends.
type countConfig struct{ n *atomic.Int64 }

func (countConfig) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countConfig) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if strings.EqualFold(cmd.Name(), "config") {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (countConfig) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A declared evicting policy with AllowEviction counts evictions with INFO
// where CONFIG is refused; where INFO is refused too, Check passes and
// nothing is counted.
func TestDeclaredPolicyStillCountsEvictions(t *testing.T) {
	t.Parallel()
	opts := redispolicy.Options{Policy: "volatile-ttl", AllowEviction: true}
	t.Run("InfoAllowed", func(t *testing.T) {
		t.Parallel()
		srv := redisproc.Start(t, "--maxmemory", "4mb", "--maxmemory-policy", "volatile-ttl", "--rename-command", "CONFIG", "")
		rdb := srv.Client(t)
		require.NoError(t, rdb.Set(t.Context(), "with-ttl", "x", time.Hour).Err())
		c := redispolicy.New(rdb, opts, "x")
		require.NoError(t, c.Check(t.Context()))
		require.True(t, c.Evicting())
		srv.Fill(t, func() bool { return srv.EvictedKeys(t) > 0 })
		n, err := c.Evictions(t.Context())
		require.NoError(t, err)
		require.Equal(t, srv.EvictedKeys(t), n)
	})
	t.Run("InfoRefused", func(t *testing.T) {
		t.Parallel()
		srv := redisproc.Start(t, "--rename-command", "CONFIG", "", "--rename-command", "INFO", "")
		c := redispolicy.New(srv.Client(t), opts, "x")
		require.NoError(t, c.Check(t.Context()))
		n, err := c.Evictions(t.Context())
		require.NoError(t, err)
		require.Zero(t, n)
	})
}
