package lease

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/internal/miniconf"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/stretchr/testify/require"
)

// These tests run in a synctest bubble: time inside moves only when every
// goroutine of the bubble is blocked, so the trust-window arithmetic can be
// checked to the nanosecond. Redis round trips take no fake time.

func fakeTimeClient(t *testing.T, mr *miniredis.Miniredis) (*Client, *scriptHook) {
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	for _, src := range []string{acquireScript.Source(), renewScript.Source(), releaseScript.Source()} {
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
	miniconf.Register(mr)
	synctest.Test(t, func(t *testing.T) {
		c, hook := fakeTimeClient(t, mr)
		const slow = 40 * time.Millisecond
		hook.delay = func() { <-time.After(slow) } // the renew reply takes 40 ms
		ttl := 300 * time.Millisecond
		start := time.Now()
		l, err := c.TryAcquire(context.Background(), "slow", ttl)
		require.NoError(t, err)
		require.Equal(t, start.Add(ttl-drift(ttl)), l.Deadline())

		// The first renew starts at start+TTL/3 and answers 40 ms later.
		<-time.After(renewInterval(ttl) + slow + time.Millisecond)
		synctest.Wait()
		require.Equal(t, 1, hook.count("renew"))
		require.Equal(t, start.Add(renewInterval(ttl)+ttl-drift(ttl)), l.Deadline(),
			"the window runs from the renew call's start, not its answer")
		require.NoError(t, l.Release(context.Background()))
	})
}

func TestHungRedisEndsTheLeaseExactlyAtTheTrustWindow(t *testing.T) {
	mr := miniredis.RunT(t)
	miniconf.Register(mr)
	synctest.Test(t, func(t *testing.T) {
		c, hook := fakeTimeClient(t, mr)
		hook.block()
		ttl := time.Second
		start := time.Now()
		l, err := c.TryAcquire(context.Background(), "hung", ttl)
		require.NoError(t, err)
		<-l.Done()
		require.Equal(t, start.Add(ttl-drift(ttl)), time.Now(), "loss is signalled at the window's end")
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
	miniconf.Register(mr)
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

// outcomes is an Observer counting acquire outcomes.
type outcomes struct {
	nopObserver
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomes) ObserveAcquire(_ string, err error, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	outcome := "error"
	switch {
	case err == nil:
		outcome = "acquired"
	case errors.Is(err, ErrNotAcquired):
		outcome = "held"
	case errors.Is(err, ErrSlowAcquire):
		outcome = "slow"
	}
	o.n[outcome]++
}

func (o *outcomes) count(outcome string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[outcome]
}

// Issue 11, part 3: a grant whose reply arrives at or after TTL - drift(TTL)
// is refused with *leasedriver.SlowAcquireError, hands out no token and deletes its key
// (miniredis keeps keys while its own clock stands still, so a key left
// behind would show). The fake clock puts the boundary to the nanosecond.
func TestSlowAcquireIsRefusedAndItsKeyDeleted(t *testing.T) {
	t.Parallel()
	ttl := 2 * time.Second
	limit := ttl - drift(ttl) // 1.978 s
	for _, tc := range []struct {
		name  string
		reply time.Duration // how long the acquire reply takes
		slow  bool
	}{
		{"JustInsideTheWindowIsGranted", limit - time.Nanosecond, false},
		{"AtTheWindowsEndIsRefused", limit, true},
		{"ReplyAfterTheTTLIsRefused", 2100 * time.Millisecond, true}, // the 2.1 s for a 2 s TTL
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mr := miniredis.RunT(t)
			miniconf.Register(mr)
			synctest.Test(t, func(t *testing.T) {
				c, hook := fakeTimeClient(t, mr)
				obs := &outcomes{}
				c.opts.Observer = obs
				hook.acquireReply = func() { <-time.After(tc.reply) }
				// A grant just inside its window is due for renewal at
				// once: the keep-alive's renew is held until the grant's
				// own deadline is read.
				hold := make(chan struct{})
				hook.delay = func() { <-hold }
				start := time.Now()
				l, err := c.TryAcquire(context.Background(), "slow", ttl)
				leaseKey, _ := KeysOf(c, "slow")
				if !tc.slow {
					require.NoError(t, err)
					require.Equal(t, start.Add(limit), l.Deadline())
					close(hold)
					require.True(t, mr.Exists(leaseKey))
					require.NoError(t, l.Release(context.Background()))
					return
				}
				require.Nil(t, l, "no lease, no token for the caller")
				require.ErrorIs(t, err, ErrSlowAcquire)
				var se *leasedriver.SlowAcquireError
				require.ErrorAs(t, err, &se)
				require.Equal(t, leasedriver.SlowAcquireError{Name: "slow", Took: tc.reply, TTL: ttl}, *se)
				require.False(t, mr.Exists(leaseKey), "the slow acquisition's key was deleted")
				require.Equal(t, 1, hook.count("release"), "one compare-and-delete")
				require.Equal(t, 1, obs.count("slow"))
				require.Zero(t, obs.count("acquired"))
				require.Zero(t, c.keeper.size(), "nothing kept alive")

				// The name is free for the next acquisition at once.
				close(hold)
				hook.acquireReply = nil
				l, err = c.TryAcquire(context.Background(), "slow", ttl)
				require.NoError(t, err)
				require.NoError(t, l.Release(context.Background()))
			})
		})
	}
}

// Acquire (the blocking form) and TryAcquireAll refuse a slow grant too.
// Acquire, asked to wait, tries again (the lease is likely free) until a
// grant comes in time or ctx ends; TryAcquireAll's window starts when the
// batch was sent, so every name of a late batch is refused, and every key
// of it deleted.
func TestSlowAcquireIsRefusedByAcquireAndTryAcquireAll(t *testing.T) {
	t.Parallel()
	ttl := time.Second
	mr := miniredis.RunT(t)
	miniconf.Register(mr)
	synctest.Test(t, func(t *testing.T) {
		c, hook := fakeTimeClient(t, mr)
		// Without the backend's Notifier: its subscription's socket read
		// would keep the bubble's clock from advancing. The waits are
		// then the backoff's timers.
		waiter, err := NewWithBackend(struct{ leasedriver.Backend }{c.b}, Options{})
		require.NoError(t, err)
		var tries atomic.Int64
		hook.acquireReply = func() {
			if tries.Add(1) <= 2 {
				<-time.After(ttl)
			}
		}
		l, err := waiter.Acquire(context.Background(), "zero", ttl)
		require.NoError(t, err, "the third grant came in time")
		require.Equal(t, int64(3), tries.Load())
		require.Equal(t, 2, hook.count("release"), "each slow grant undone")
		require.NoError(t, l.Release(context.Background()))

		hook.acquireReply = func() { <-time.After(ttl) }
		wait, cancel := context.WithTimeout(context.Background(), 5*ttl)
		defer cancel()
		l, err = waiter.Acquire(wait, "one", ttl)
		require.Nil(t, l)
		require.ErrorIs(t, err, context.DeadlineExceeded, "every grant slow: tried until ctx ended")
		require.ErrorIs(t, err, ErrSlowAcquire, "with the last try's error")

		names := []string{"a", "b", "c"}
		leases, errs := c.TryAcquireAll(context.Background(), names, ttl)
		for i, name := range names {
			require.Nil(t, leases[i], name)
			require.ErrorIs(t, errs[i], ErrSlowAcquire, name)
		}
		for _, name := range append(names, "one") {
			leaseKey, _ := KeysOf(c, name)
			require.False(t, mr.Exists(leaseKey), "%s: key deleted", name)
		}
		require.Zero(t, c.keeper.size())
	})
}

// size returns how many leases k keeps alive.
func (k *keeper) size() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.leases)
}

// Issue 11, part 7 (quorum TestFrozenHolderWritesAreRefusedByTheGuard,
// "frozen A still believes it holds the lease" under load): a renewal on
// the wire when the lease is frozen answered "not ours" after the key
// expired, and ended the frozen lease. A frozen lease ignores the answer;
// once thawed past its window it is lost with ErrExpired.
func TestRenewalInFlightWhenFrozenDoesNotEndTheLease(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	miniconf.Register(mr)
	synctest.Test(t, func(t *testing.T) {
		c, hook := fakeTimeClient(t, mr)
		ttl := 300 * time.Millisecond
		l, err := c.TryAcquire(context.Background(), "frozen", ttl)
		require.NoError(t, err)
		hook.block()
		<-time.After(renewInterval(ttl) + time.Millisecond)
		synctest.Wait() // the first renewal waits in the hook
		require.Zero(t, hook.count("renew"))
		l.freeze()
		leaseKey, _ := KeysOf(c, "frozen")
		mr.Del(leaseKey) // the key expires meanwhile
		hook.unblock()
		synctest.Wait() // the renewal's answer: not ours
		require.Equal(t, 1, hook.count("renew"))
		require.NoError(t, l.Err(), "the frozen holder still believes it holds the lease")
		<-time.After(time.Until(l.Deadline()))
		l.thaw()
		synctest.Wait()
		require.ErrorIs(t, l.Err(), ErrExpired)
		require.ErrorIs(t, l.Release(context.Background()), ErrNotHeld, "the key had gone")
	})
}
