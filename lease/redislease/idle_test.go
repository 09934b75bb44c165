package redislease_test

import (
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/miniconf"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

func TestIdleCounterTTLOptions(t *testing.T) {
	t.Parallel()
	rdb := redistest.Mini(t)
	for _, bad := range []time.Duration{-time.Hour, time.Second, redislease.MinIdleCounterTTL - time.Millisecond} {
		_, err := redislease.NewBackend(rdb, redislease.Options{IdleCounterTTL: bad})
		require.ErrorIs(t, err, leasedriver.ErrInvalidOptions, "%v", bad)
	}
	_, err := redislease.NewBackend(rdb, redislease.Options{IdleCounterTTL: redislease.MinIdleCounterTTL})
	require.NoError(t, err)
}

// With IdleCounterTTL, every acquisition (plain or waiting) sets the
// counter and the holder label to expire that long after it; without it
// they are kept. When the counter is gone (expired: deleted here, as
// Redis would), the next token still exceeds every token before it: the
// clock floor.
func TestIdleCounterTTL(t *testing.T) {
	t.Parallel()
	for _, be := range redistest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			rdb := be.New(t)
			prefix := redistest.Prefix(t, rdb)
			b, err := redislease.NewBackend(rdb, redislease.Options{Prefix: prefix, Holder: "replica-a", IdleCounterTTL: 2 * time.Hour})
			require.NoError(t, err)
			k, err := b.Keys("job")
			require.NoError(t, err)

			g, err := b.Acquire(ctx, "job", "owner-1", time.Minute)
			require.NoError(t, err)
			require.True(t, g.Acquired)
			for _, key := range []string{k.Fence, k.Holder} {
				ttl := rdb.PTTL(ctx, key).Val()
				require.Greater(t, ttl, 2*time.Hour-time.Minute, key)
				require.LessOrEqual(t, ttl, 2*time.Hour, key)
			}
			require.NoError(t, b.Release(ctx, leasedriver.Held{Name: "job", Owner: "owner-1", TTL: time.Minute, Handle: g.Handle}))
			require.Greater(t, rdb.PTTL(ctx, k.Fence).Val(), time.Hour, "a release keeps the counter's expiry")

			w, err := b.AcquireWaiting(ctx, "job", "owner-2", time.Minute, time.Second)
			require.NoError(t, err)
			require.True(t, w.Acquired)
			require.Greater(t, w.Token, g.Token)
			require.Greater(t, rdb.PTTL(ctx, k.Fence).Val(), time.Hour, "a waiting acquisition sets it too")
			require.NoError(t, b.Release(ctx, leasedriver.Held{Name: "job", Owner: "owner-2", TTL: time.Minute, Handle: w.Handle}))

			require.NoError(t, rdb.Del(ctx, k.Fence, k.Holder).Err())
			again, err := b.Acquire(ctx, "job", "owner-3", time.Minute)
			require.NoError(t, err)
			require.True(t, again.Acquired)
			require.Greater(t, again.Token, w.Token, "the clock floor after the counter went")

			kept, err := redislease.NewBackend(rdb, redislease.Options{Prefix: prefix + "kept:", Holder: "replica-a"})
			require.NoError(t, err)
			g, err = kept.Acquire(ctx, "job", "owner-1", time.Minute)
			require.NoError(t, err)
			require.True(t, g.Acquired)
			kk, err := kept.Keys("job")
			require.NoError(t, err)
			require.Equal(t, time.Duration(-1), rdb.PTTL(ctx, kk.Fence).Val(), "no expiry by default")
			require.Equal(t, time.Duration(-1), rdb.PTTL(ctx, kk.Holder).Val())
		})
	}
}

// The assumption of IdleCounterTTL, shown on miniredis' settable clock: a
// counter that expired is safe to lose while the server clock steps back
// by less than IdleCounterTTL; the control steps it back further and the
// token regresses below one already issued, which is what the checker
// (token order) catches.
func TestIdleCounterTTLClockAssumption(t *testing.T) {
	t.Parallel()
	const idle = 2 * time.Hour
	run := func(t *testing.T, stepBack time.Duration) (first, next fence.Token) {
		ctx := t.Context()
		mr := miniredis.RunT(t)
		miniconf.Register(mr)
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		b, err := redislease.NewBackend(rdb, redislease.Options{IdleCounterTTL: idle})
		require.NoError(t, err)
		t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
		mr.SetTime(t0)
		g, err := b.Acquire(ctx, "job", "owner-1", time.Minute)
		require.NoError(t, err)
		require.True(t, g.Acquired)
		require.NoError(t, b.Release(ctx, leasedriver.Held{Name: "job", Owner: "owner-1", TTL: time.Minute, Handle: g.Handle}))
		idleFor := idle + time.Second
		mr.FastForward(idleFor)
		k, err := b.Keys("job")
		require.NoError(t, err)
		require.False(t, mr.Exists(k.Fence), "the counter expired after IdleCounterTTL")
		mr.SetTime(t0.Add(idleFor - stepBack))
		n, err := b.Acquire(ctx, "job", "owner-2", time.Minute)
		require.NoError(t, err)
		require.True(t, n.Acquired)
		return g.Token, n.Token
	}
	first, next := run(t, time.Hour)
	require.Greater(t, next, first, "a clock stepped back by less than IdleCounterTTL")
	first, next = run(t, 3*time.Hour)
	require.Less(t, next, first, "control: a clock stepped back further than IdleCounterTTL regresses the token")
}
