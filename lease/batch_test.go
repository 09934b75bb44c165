package lease

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

// acquireMany takes n leases over 16 goroutines.
func acquireMany(t *testing.T, c *Client, n int, ttl time.Duration) []*Lease {
	t.Helper()
	leases := make([]*Lease, n)
	var wg sync.WaitGroup
	const workers = 16
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				l, err := c.TryAcquire(context.Background(), fmt.Sprintf("many-%d", i), ttl)
				if err != nil {
					t.Error(err)
					return
				}
				leases[i] = l
			}
		})
	}
	wg.Wait()
	require.False(t, t.Failed())
	return leases
}

func releaseAll(t *testing.T, leases []*Lease) {
	t.Helper()
	for _, l := range leases {
		if l != nil {
			_ = l.Release(context.Background())
		}
	}
}

func TestManyLeasesAreRenewedInBatches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		backend   redistest.Backend
		n, batch  int
		intervals int
		ttl       time.Duration
	}{
		// A renewal may come up to TTL*2/3 late before a lease is lost:
		// 6 s on real Redis, enough for a pass of 10,000 renewals on a
		// busy 2-core machine under -race, where 4 s was not always; 10 s
		// on miniredis, whose server runs in the test process under -race
		// and was seen 6 s late at load average 20.
		{redistest.Backends()[0], 10_000, 1000, 3, 9 * time.Second},
		{redistest.Backends()[1], 1_000, 100, 3, 15 * time.Second},
	} {
		t.Run(tc.backend.Name, func(t *testing.T) {
			t.Parallel()
			rdb := tc.backend.New(t)
			hook := newScriptHook()
			rdb.AddHook(hook)
			c, err := New(rdb, Options{Prefix: redistest.Prefix(t, rdb), BatchSize: tc.batch})
			require.NoError(t, err)
			ttl := tc.ttl
			leases := acquireMany(t, c, tc.n, ttl)
			defer releaseAll(t, leases)

			// After one round (batches form as leases were acquired over
			// a spread of time), watch intervals rounds of renewal.
			testwait.Until(t, 4*renewInterval(ttl), "first round", func() bool { return hook.count("renew") >= tc.n })
			base, basePipes := hook.count("renew"), hook.pipelineCount()
			want := base + tc.intervals*tc.n
			testwait.Until(t, time.Minute, "renewals", func() bool {
				return hook.count("renew") >= want
			})
			pipes := hook.pipelineCount() - basePipes
			perInterval := (tc.n + tc.batch - 1) / tc.batch
			t.Logf("%d leases, batch %d: %d renewals in %d round trips (limit %d per interval)",
				tc.n, tc.batch, hook.count("renew")-base, pipes, perInterval)
			require.LessOrEqual(t, pipes, (tc.intervals+1)*perInterval,
				"at most ceil(n/batch) round trips per interval")
			for _, l := range leases {
				require.NoError(t, l.Err())
			}
		})
	}
}

func TestLosingOneLeaseCancelsOnlyThatLease(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		// A TTL well above a renew round trip under load: only the
		// deleted key may end a lease here.
		ttl := 2 * time.Second
		leases := acquireMany(t, s.client, 20, ttl)
		defer releaseAll(t, leases)
		victim := leases[7]
		require.NoError(t, s.rdb.Del(context.Background(), func() string { k, _ := KeysOf(s.client, victim.Name()); return k }()).Err())
		testwait.Done(t, victim.Done(), 5*time.Second, "victim lost")
		require.ErrorIs(t, victim.Err(), ErrNotHeld)
		// Two more rounds: everyone else is still held.
		base := s.hook.count("renew")
		testwait.Until(t, 5*time.Second, "two more rounds", func() bool { return s.hook.count("renew") >= base+2*19 })
		for i, l := range leases {
			if i != 7 {
				require.NoError(t, l.Err(), "lease %d", i)
			}
		}
	})
}

func TestWaiterIsWokenByReleaseNotByPolling(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		// Polling would wait 30 s or more: only the release message can
		// wake the waiter in time.
		c, err := New(s.rdb, Options{Prefix: s.prefix, RetryMin: time.Minute, RetryMax: time.Minute})
		require.NoError(t, err)
		ctx := context.Background()
		holder, err := c.TryAcquire(ctx, "handoff", time.Minute)
		require.NoError(t, err)
		got := make(chan *Lease, 1)
		go func() {
			l, err := c.Acquire(ctx, "handoff", time.Minute)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		testwait.Until(t, 5*time.Second, "waiter tried twice", func() bool { return s.hook.count("acquire") >= 3 })
		require.NoError(t, holder.Release(ctx))
		l := woken(t, got, "waiter not woken by the release")
		require.Greater(t, l.Token(), holder.Token())
		require.Equal(t, 4, s.hook.count("acquire"), "one round trip for the wake-up")
		require.NoError(t, l.Release(ctx))
	})
}

// woken returns the lease a blocked Acquire sent on got, failing with msg
// when none comes within 10 s (far less than the poll of the tests'
// waiters: their RetryMin is a minute, so only a release wakes them).
func woken(t *testing.T, got <-chan *Lease, msg string) *Lease {
	t.Helper()
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case l := <-got:
		require.NotNil(t, l)
		return l
	case <-timer.C:
		t.Fatal(msg)
		return nil
	}
}

func TestReplicaAckFailsWithoutReplicasAndReleases(t *testing.T) {
	t.Parallel()
	rdb := redistest.Real(t)
	prefix := redistest.Prefix(t, rdb)
	c, err := New(rdb, Options{Prefix: prefix, ReplicaAck: redislease.ReplicaAck{Replicas: 1, Timeout: 20 * time.Millisecond}})
	require.NoError(t, err)
	_, err = c.TryAcquire(context.Background(), "acked", time.Minute)
	var nre *redislease.NotReplicatedError
	require.ErrorAs(t, err, &nre)
	require.ErrorIs(t, err, redislease.ErrNotReplicated)
	require.Equal(t, 1, nre.Want)
	require.Equal(t, 0, nre.Got)
	leaseKey, _ := KeysOf(c, "acked")
	n, err := rdb.Exists(context.Background(), leaseKey).Result()
	require.NoError(t, err)
	require.Zero(t, n, "an unacknowledged acquire is released")
}

func TestReleaseNobodyWaitsForPublishesNothing(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		leaseKey, _ := KeysOf(s.client, "quiet")
		waitingKey := leaseKey + ":waiting"
		sub := s.rdb.Subscribe(ctx, leaseKey+":released")
		defer sub.Close()
		_, err := sub.Receive(ctx)
		require.NoError(t, err)
		// Messages and pongs arrive in order: what comes before a pong was
		// published before the ping.
		next := func() any {
			t.Helper()
			m, err := sub.ReceiveTimeout(ctx, 10*time.Second)
			require.NoError(t, err)
			return m
		}

		// Nobody waits: the release publishes nothing.
		first, err := s.client.TryAcquire(ctx, "quiet", time.Minute)
		require.NoError(t, err)
		release(t, first)
		require.NoError(t, sub.Ping(ctx, "after the first release"))
		require.IsType(t, &redis.Pong{}, next(), "a release nobody waits for published")

		// A waiting try (a blocked Acquire's, once it listens) flags the
		// lease for the given time; the release publishes and deletes the
		// flag with the lease key.
		second, err := s.client.TryAcquire(ctx, "quiet", time.Minute)
		require.NoError(t, err)
		g, err := s.client.b.(leasedriver.WaitingAcquirer).AcquireWaiting(ctx, "quiet", "waiter", time.Minute, 2*time.Minute)
		require.NoError(t, err)
		require.False(t, g.Acquired)
		require.Greater(t, g.Remaining, 50*time.Second, "the holder's remaining TTL")
		flagTTL, err := s.rdb.PTTL(ctx, waitingKey).Result()
		require.NoError(t, err)
		require.Greater(t, flagTTL, time.Minute)
		require.LessOrEqual(t, flagTTL, 2*time.Minute)
		release(t, second)
		require.IsType(t, &redis.Message{}, next(), "a release someone waits for did not publish")
		n, err := s.rdb.Exists(ctx, leaseKey, waitingKey).Result()
		require.NoError(t, err)
		require.Zero(t, n, "the release deletes the lease key and the flag")
	})
}

func TestAWaiterNeverShortensAnotherWaitersFlag(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		// A waiter with a long RetryMax flags the lease for twice that; a
		// waiter with a short one, giving up soon, must not cut the flag
		// to its own length: the release would then not wake the first.
		ctx := context.Background()
		slow, err := New(s.rdb, Options{Prefix: s.prefix, RetryMin: time.Minute, RetryMax: time.Minute})
		require.NoError(t, err)
		fast, err := New(s.rdb, Options{Prefix: s.prefix, RetryMin: 10 * time.Millisecond, RetryMax: 10 * time.Millisecond})
		require.NoError(t, err)
		leaseKey, _ := KeysOf(s.client, "mixed")
		waitingKey := leaseKey + ":waiting"
		holder, err := s.client.TryAcquire(ctx, "mixed", time.Minute)
		require.NoError(t, err)

		wctx, cancel := context.WithCancel(ctx)
		got := make(chan *Lease, 1)
		var wg sync.WaitGroup
		wg.Go(func() {
			l, _ := slow.Acquire(wctx, "mixed", time.Minute)
			got <- l
		})
		defer func() { cancel(); wg.Wait() }()
		flag := func() time.Duration {
			d, err := s.rdb.PTTL(ctx, waitingKey).Result()
			require.NoError(t, err)
			return d
		}
		testwait.Until(t, 5*time.Second, "the slow waiter flagged the lease", func() bool { return flag() > time.Minute })

		// The fast waiter's try, as its blocked Acquire makes it.
		g, err := fast.b.(leasedriver.WaitingAcquirer).AcquireWaiting(ctx, "mixed", "fast", time.Minute, fast.flagTTL())
		require.NoError(t, err)
		require.False(t, g.Acquired)
		require.Greater(t, flag(), time.Minute, "the fast waiter's try shortened the flag")

		require.NoError(t, holder.Release(ctx))
		l := woken(t, got, "the slow waiter was not woken by the release (its poll comes in 30 s or more)")
		require.NoError(t, l.Release(ctx))
	})
}

func TestTwoWaitersAreWokenInTurnByReleases(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		// Polling would wait 30 s or more: each hand-off must come from a
		// release message, so the waiter that lost the first wake-up must
		// have flagged the next holder again.
		c, err := New(s.rdb, Options{Prefix: s.prefix, RetryMin: time.Minute, RetryMax: time.Minute})
		require.NoError(t, err)
		ctx := context.Background()
		holder, err := c.TryAcquire(ctx, "turns", time.Minute)
		require.NoError(t, err)
		wctx, cancel := context.WithCancel(ctx)
		got := make(chan *Lease, 2)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				l, err := c.Acquire(wctx, "turns", time.Minute)
				if err != nil {
					l = nil // canceled at the end of a failed test
				}
				got <- l
			})
		}
		defer func() {
			cancel()
			wg.Wait()
			for range len(got) {
				if l := <-got; l != nil {
					_ = l.Release(ctx)
				}
			}
		}()
		testwait.Until(t, 5*time.Second, "both waiters tried twice", func() bool { return s.hook.count("acquire") >= 5 })
		require.NoError(t, holder.Release(ctx))
		last := holder.Token()
		for range 2 {
			l := woken(t, got, "a waiter was not woken by a release")
			require.Greater(t, l.Token(), last)
			last = l.Token()
			require.NoError(t, l.Release(ctx))
		}
	})
}

func TestFlagTTLIsTwiceRetryMaxAtMostADay(t *testing.T) {
	t.Parallel()
	rdb := redistest.Mini(t)
	for _, tc := range []struct{ retryMax, want time.Duration }{
		{0, 2 * defaultRetryMax},
		{100 * time.Millisecond, 200 * time.Millisecond},
		{12 * time.Hour, 24 * time.Hour},
		{13 * time.Hour, 24 * time.Hour},
		{time.Duration(1<<63 - 1), 24 * time.Hour}, // "no cap": no overflow
	} {
		c, err := New(rdb, Options{RetryMax: tc.retryMax})
		require.NoError(t, err)
		require.Equal(t, tc.want, c.flagTTL(), "RetryMax %v", tc.retryMax)
	}
}
