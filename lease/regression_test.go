package lease_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasetest"
)

// These tests run against test-owned redis-server processes
// (internal/redisproc): they kill, restart, flush, evict and SIGSTOP them.

const procPrefix = "holdfast-proc:"

// plainIncrScript is the negative control: the acquire script without the
// TIME floor, a bare INCR counter as naive fencing implementations use.
var plainIncrScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('INCR', KEYS[2])}
end
return {0, redis.call('PTTL', KEYS[1])}`)

// tokenLog finds regressions: a token not strictly greater than every
// token issued before it.
type tokenLog struct{ highest fence.Token }

// add records tok and returns an error when it regressed.
func (g *tokenLog) add(tok fence.Token) error {
	if tok <= g.highest {
		return fmt.Errorf("token %d issued after token %d: regression", tok, g.highest)
	}
	g.highest = tok
	return nil
}

// lossCase is one way Redis loses a lease's fence counter.
type lossCase struct {
	name string
	lose func(t *testing.T, srv *redisproc.Server, rdb *redis.Client, fenceKeys ...string)
}

var lossCases = []lossCase{
	{"KillAndRestartEmpty", func(t *testing.T, srv *redisproc.Server, rdb *redis.Client, _ ...string) {
		srv.Restart(t)
		n, err := rdb.DBSize(context.Background()).Result()
		require.NoError(t, err)
		require.Zero(t, n, "restarted without persistence")
	}},
	{"FlushAll", func(t *testing.T, _ *redisproc.Server, rdb *redis.Client, _ ...string) {
		require.NoError(t, rdb.FlushAll(context.Background()).Err())
	}},
	{"CounterDeleted", func(t *testing.T, _ *redisproc.Server, rdb *redis.Client, fenceKeys ...string) {
		require.NoError(t, rdb.Del(context.Background(), fenceKeys...).Err())
	}},
	{"CounterEvictedByMaxmemory", func(t *testing.T, _ *redisproc.Server, rdb *redis.Client, fenceKeys ...string) {
		evict(t, rdb, fenceKeys...)
	}},
}

func TestTokensNeverRegressAfterTheCounterIsLost(t *testing.T) {
	t.Parallel()
	for _, lc := range lossCases {
		t.Run(lc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := redisproc.Start(t)
			rdb := srv.Client(t)
			c, err := lease.New(rdb, lease.Options{Prefix: procPrefix})
			require.NoError(t, err)
			_, fenceKey := lease.KeysOf(c, "regress")

			var log tokenLog
			acquire := func(round int) {
				t.Helper()
				for i := range 5 {
					l, err := c.TryAcquire(ctx, "regress", time.Minute)
					require.NoError(t, err)
					require.NoError(t, log.add(l.Token()), "round %d, acquisition %d", round, i)
					require.NoError(t, l.Release(ctx))
				}
			}
			acquire(0)
			for round := 1; round <= 3; round++ {
				lc.lose(t, srv, rdb, fenceKey)
				n, err := rdb.Exists(ctx, fenceKey).Result()
				require.NoError(t, err)
				require.Zero(t, n, "the counter is gone")
				acquire(round)
			}
		})
	}
}

// The same checks catch a counter without the TIME floor: each loss makes
// its next token go back (to 1).
func TestNegativeControlPlainIncrCounterRegresses(t *testing.T) {
	t.Parallel()
	for _, lc := range lossCases {
		t.Run(lc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			srv := redisproc.Start(t)
			rdb := srv.Client(t)
			leaseKey, fenceKey := procPrefix+"{plain}", procPrefix+"{plain}:fence"
			acquire := func() fence.Token {
				t.Helper()
				res, err := plainIncrScript.Run(ctx, rdb, []string{leaseKey, fenceKey}, "owner", 60000).Int64Slice()
				require.NoError(t, err)
				require.Equal(t, int64(1), res[0])
				require.NoError(t, rdb.Del(ctx, leaseKey).Err()) // release
				return fence.Token(res[1])
			}

			var log tokenLog
			for range 5 {
				require.NoError(t, log.add(acquire()))
			}
			lc.lose(t, srv, rdb, fenceKey)
			tok := acquire()
			err := log.add(tok)
			require.Error(t, err, "the check must catch the regression")
			require.Equal(t, fence.Token(1), tok, "a lost INCR counter starts again at 1")
			t.Logf("negative control after %s: %v", lc.name, err)
		})
	}
}

// evict fills the server under maxmemory with allkeys-lru until every key
// in keys has been evicted, then lifts the limit.
func evict(t *testing.T, rdb *redis.Client, keys ...string) {
	t.Helper()
	ctx := context.Background()
	info, err := rdb.Info(ctx, "memory").Result()
	require.NoError(t, err)
	used, err := strconv.ParseInt(infoValue(info, "used_memory"), 10, 64)
	require.NoError(t, err)
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err())
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used+1<<20, 10)).Err())

	filler := strings.Repeat("x", 8<<10)
	next := 0
	testwait.Until(t, 20*time.Second, "counter evicted", func() bool {
		pipe := rdb.Pipeline()
		for range 32 {
			pipe.Set(ctx, fmt.Sprintf("filler:%d", next), filler, 0)
			next++
		}
		_, err := pipe.Exec(ctx)
		require.NoError(t, err)
		// EXISTS does not touch the keys' LRU clock.
		n, err := rdb.Exists(ctx, keys...).Result()
		require.NoError(t, err)
		return n == 0
	})
	info, err = rdb.Info(ctx, "stats").Result()
	require.NoError(t, err)
	require.NotEqual(t, "0", infoValue(info, "evicted_keys"))
	require.NoError(t, rdb.ConfigSet(ctx, "maxmemory", "0").Err())
	t.Logf("evicted after %d filler keys (evicted_keys:%s)", next, infoValue(info, "evicted_keys"))
}

func TestPausedRedisLosesTheLeaseByItsTrustWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := redisproc.Start(t)
	rdb := srv.Client(t, func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond })
	c, err := lease.New(rdb, lease.Options{Prefix: procPrefix})
	require.NoError(t, err)
	const ttl = 500 * time.Millisecond

	old := leasetest.TryAcquire(t, c, "paused", ttl)
	pausedAt := time.Now()
	srv.Pause(t)

	testwait.Done(t, old.Done(), 5*time.Second, "loss while Redis is stopped")
	lostAt := time.Now()
	require.ErrorIs(t, old.Err(), lease.ErrLost)
	require.ErrorIs(t, old.Err(), lease.ErrExpired)
	deadline := old.Deadline()
	require.False(t, deadline.After(pausedAt.Add(ttl)), "no renew answered after the pause: the window ends within a TTL of it")
	require.False(t, lostAt.Before(deadline), "lost before the trust window ended")
	// The expiry timer fires at the deadline; allow for scheduling under -race.
	require.Less(t, lostAt.Sub(deadline), 250*time.Millisecond, "loss signalled late")
	t.Logf("lost %v after the pause, %v after the window's end", lostAt.Sub(pausedAt), lostAt.Sub(deadline))

	srv.Resume(t)
	// The old key may outlive the holder's trust window by the drift:
	// Acquire waits for it.
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	fresh, err := c.Acquire(actx, "paused", ttl)
	require.NoError(t, err)
	require.Greater(t, fresh.Token(), old.Token())
	require.NoError(t, fresh.Release(ctx))
	// The old lease's key expired in Redis: its release deletes nothing.
	require.ErrorIs(t, old.Release(ctx), lease.ErrNotHeld)
}

// infoValue returns field's value in an INFO reply.
func infoValue(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}

// A counter ahead of the clock (a Redis clock stepped back, or tokens
// issued within one microsecond) keeps counting up from the last token:
// the TIME floor never lowers a token.
func TestTokensCountUpFromACounterAheadOfTheClock(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rdb := b.New(t)
			c, err := lease.New(rdb, lease.Options{Prefix: redistest.Prefix(t, rdb)})
			require.NoError(t, err)
			_, fenceKey := lease.KeysOf(c, "ahead")
			const ahead = 1 << 52 // µs: the year 2112
			require.NoError(t, rdb.Set(ctx, fenceKey, ahead, 0).Err())
			for i := range 3 {
				l, err := c.TryAcquire(ctx, "ahead", time.Minute)
				require.NoError(t, err)
				require.Equal(t, fence.Token(ahead+i+1), l.Token())
				require.NoError(t, l.Release(ctx))
				stored, err := rdb.Get(ctx, fenceKey).Int64()
				require.NoError(t, err)
				require.EqualValues(t, ahead+i+1, stored, "the counter holds the last token")
			}
		})
	}
}
