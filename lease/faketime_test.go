package lease

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// These tests run in a synctest bubble: time inside moves only when every
// goroutine of the bubble is blocked, so the trust-window arithmetic can be
// checked to the nanosecond. Redis round trips take no fake time.

func fakeTimeClient(t *testing.T, mr *miniredis.Miniredis) (*Client, *scriptHook) {
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	for _, src := range []string{acquireSrc, renewSrc, releaseSrc} {
		// Loaded up front, so each call is one EVALSHA and a delay in
		// the hook applies once.
		require.NoError(t, rdb.ScriptLoad(context.Background(), src).Err())
	}
	hook := newScriptHook()
	rdb.AddHook(hook)
	c, err := New(rdb, Options{})
	require.NoError(t, err)
	return c, hook
}

func TestSlowRenewDoesNotExtendTrustWindow(t *testing.T) {
	mr := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		c, hook := fakeTimeClient(t, mr)
		const slow = 40 * time.Millisecond
		hook.delay = func() { <-time.After(slow) } // the renew reply takes 40 ms
		ttl := 300 * time.Millisecond
		start := time.Now()
		l, err := c.TryAcquire(context.Background(), "slow", ttl)
		require.NoError(t, err)
		require.Equal(t, start.Add(ttl-Drift(ttl)), l.Deadline())

		// The first renew starts at start+TTL/3 and answers 40 ms later.
		<-time.After(RenewInterval(ttl) + slow + time.Millisecond)
		synctest.Wait()
		require.Equal(t, 1, hook.count("renew"))
		require.Equal(t, start.Add(RenewInterval(ttl)+ttl-Drift(ttl)), l.Deadline(),
			"the window runs from the renew call's start, not its answer")
		require.NoError(t, l.Release(context.Background()))
	})
}

func TestHungRedisEndsTheLeaseExactlyAtTheTrustWindow(t *testing.T) {
	mr := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		c, hook := fakeTimeClient(t, mr)
		hook.block()
		ttl := time.Second
		start := time.Now()
		l, err := c.TryAcquire(context.Background(), "hung", ttl)
		require.NoError(t, err)
		<-l.Done()
		require.Equal(t, start.Add(ttl-Drift(ttl)), time.Now(), "loss is signalled at the window's end")
		require.Less(t, time.Since(start), ttl, "before Redis can expire the key and hand it out")
		require.ErrorIs(t, l.Err(), ErrExpired)
		require.NoError(t, l.Release(context.Background()))
	})
}

// A renewal that hangs on Redis for a long-TTL lease does not hold up the
// loss signal of a short-TTL lease outside its batch: the keep-alive timer
// stays armed for trust windows while a renewal is in flight.
func TestHungRenewalOfOneLeaseDoesNotDelayTheLossOfAnother(t *testing.T) {
	mr := miniredis.RunT(t)
	synctest.Test(t, func(t *testing.T) {
		c, hook := fakeTimeClient(t, mr)
		long, err := c.TryAcquire(context.Background(), "long", 30*time.Second)
		require.NoError(t, err)
		// The short lease comes just before the long one's first renewal
		// (at 10 s), so it is not in that batch.
		<-time.After(9900 * time.Millisecond)
		short, err := c.TryAcquire(context.Background(), "short", time.Second)
		require.NoError(t, err)
		hook.block() // Redis hangs from now on
		want := short.Deadline()
		<-short.Done()
		require.Equal(t, want, time.Now(), "the short lease is lost at the end of its trust window")
		require.ErrorIs(t, short.Err(), ErrExpired)
		require.NoError(t, long.Err(), "the long lease's window has not ended")
		hook.unblock()
		require.NoError(t, short.Release(context.Background()))
		require.NoError(t, long.Release(context.Background()))
	})
}
