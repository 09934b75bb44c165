package chaos

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/lease"
)

// plainIncr is the negative control's token source: the acquire script
// without the TIME floor, a bare INCR counter as naive fencing
// implementations use.
var plainIncr = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('INCR', KEYS[2])}
end
return {0, redis.call('PTTL', KEYS[1])}`)

// TestRedisRestartedWithoutPersistence: per trial, a few acquisitions, one
// lease held, then Redis is SIGKILLed and restarted empty (no RDB, no AOF),
// and the lease is acquired again. Every token must exceed every token
// issued before the restart. Control: the same with a plain INCR counter,
// which starts again at 1.
func TestRedisRestartedWithoutPersistence(t *testing.T) {
	t.Parallel()
	const name = "redis-restart"
	n := trials(100)
	r := newReport(name, n, controls(n))
	srv := redisproc.Start(t)
	rdb := srv.Client(t)
	c, err := lease.New(rdb, lease.Options{Prefix: "chaos:"})
	require.NoError(t, err)
	bar := newProgress(name, n+r.controls)

	regressions := 0
	for i := range n {
		ctx := trialCtx(t, 30*time.Second)
		lname := fmt.Sprintf("restart-%d", i)
		var highest fence.Token
		for range 3 {
			l, err := tryAcquire(ctx, c, lname, time.Minute)
			require.NoError(t, err)
			require.Greater(t, l.Token(), highest)
			highest = l.Token()
			require.NoError(t, l.Release(ctx))
		}
		held, err := tryAcquire(ctx, c, lname, time.Minute)
		require.NoError(t, err)
		highest = held.Token()

		srv.Restart(t)
		size, err := rdb.DBSize(ctx).Result()
		require.NoError(t, err)
		require.Zero(t, size, "restarted without persistence")

		// The old holder's key is gone: the new acquisition succeeds while
		// it still believes it holds the lease.
		l, err := tryAcquire(ctx, c, lname, time.Minute)
		require.NoError(t, err)
		if l.Token() <= highest {
			regressions++
			t.Logf("trial %d: token %d after %d", i, l.Token(), highest)
		}
		require.NoError(t, l.Release(ctx))
		_ = held.Release(ctx) // lost: its key went with the restart
		bar.step()
	}
	r.violations = regressions
	r.add("token_regressions", regressions)

	for i := range r.controls {
		ctx := trialCtx(t, 30*time.Second)
		leaseKey, fenceKey := fmt.Sprintf("chaos:{plain-%d}", i), fmt.Sprintf("chaos:{plain-%d}:fence", i)
		plain := func() fence.Token {
			res, err := plainIncr.Run(ctx, rdb, []string{leaseKey, fenceKey}, "owner", 60000).Int64Slice()
			require.NoError(t, err)
			require.Equal(t, int64(1), res[0])
			require.NoError(t, rdb.Del(ctx, leaseKey).Err())
			return fence.Token(res[1])
		}
		var highest fence.Token
		for range 3 {
			highest = max(highest, plain())
		}
		srv.Restart(t)
		if tok := plain(); tok <= highest {
			r.fired++
			t.Logf("control %d: plain INCR token %d after %d", i, tok, highest)
		}
		bar.step()
	}
	r.finish(t)
}
