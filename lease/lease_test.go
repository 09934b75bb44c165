package lease

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
)

// setup is the per-test bundle: a client over one backend, the raw Redis
// client for inspection, and the hook watching its scripts.
type setup struct {
	rdb    redis.UniversalClient
	client *Client
	hook   *scriptHook
	prefix string
}

func newSetup(t *testing.T, b redistest.Backend) *setup {
	t.Helper()
	rdb := b.New(t)
	hook := newScriptHook()
	rdb.AddHook(hook)
	prefix := redistest.Prefix(t, rdb)
	c, err := New(rdb, Options{Prefix: prefix})
	require.NoError(t, err)
	return &setup{rdb: rdb, client: c, hook: hook, prefix: prefix}
}

// eachBackend runs fn against real Redis and miniredis.
func eachBackend(t *testing.T, fn func(t *testing.T, s *setup)) {
	t.Helper()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, newSetup(t, b))
		})
	}
}

// tryAcquire is TryAcquire for a short TTL: it tries again while a loaded
// machine makes the grant too slow to use (ErrSlowAcquire), as
// leasetest.TryAcquire does for the external tests.
func tryAcquire(t *testing.T, c *Client, name string, ttl time.Duration) *Lease {
	t.Helper()
	var l *Lease
	testwait.Until(t, 10*time.Second, "a grant fast enough for "+ttl.String(), func() bool {
		var err error
		l, err = c.TryAcquire(context.Background(), name, ttl)
		if !errors.Is(err, ErrSlowAcquire) {
			require.NoError(t, err)
		}
		return err == nil
	})
	return l
}

func release(t *testing.T, l *Lease) {
	t.Helper()
	require.NoError(t, l.Release(context.Background()))
}

func TestBadInputIsRejectedWithTypedErrors(t *testing.T) {
	t.Parallel()
	rdb := redistest.Mini(t)
	_, err := New(nil, Options{})
	require.ErrorIs(t, err, ErrNilClient)
	_, err = New((*redis.Client)(nil), Options{})
	require.ErrorIs(t, err, ErrNilClient, "a typed nil client")
	_, err = New(rdb, Options{Prefix: "a{b}:"})
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = New(rdb, Options{RetryMin: time.Second, RetryMax: time.Millisecond})
	require.ErrorIs(t, err, ErrInvalidOptions)

	c, err := New(rdb, Options{})
	require.NoError(t, err)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		ttl  time.Duration
		want error
	}{
		{"", time.Second, ErrInvalidName},
		{strings.Repeat("x", MaxNameLen+1), time.Second, ErrInvalidName},
		{"a{b}", time.Second, ErrInvalidName},
		{"job", 0, ErrInvalidTTL},
		{"job", -time.Second, ErrInvalidTTL},
		{"job", MinTTL - 1, ErrInvalidTTL},
	} {
		_, err := c.TryAcquire(ctx, tc.name, tc.ttl)
		require.ErrorIs(t, err, tc.want, "TryAcquire(%q, %v)", tc.name, tc.ttl)
		_, err = c.Acquire(ctx, tc.name, tc.ttl)
		require.ErrorIs(t, err, tc.want, "Acquire(%q, %v)", tc.name, tc.ttl)
	}
	keys, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	require.Empty(t, keys, "bad input must not touch Redis")

	// A Release that got no answer can be tried again.
	held, err := c.TryAcquire(ctx, "retry-release", time.Minute)
	require.NoError(t, err)
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, held.Release(canceled), context.Canceled)
	require.NoError(t, held.Release(ctx), "released on the second try")
	leaseKey, _ := KeysOf(c, "retry-release")
	n, err := rdb.Exists(ctx, leaseKey).Result()
	require.NoError(t, err)
	require.Zero(t, n)

	var nilLease *Lease
	require.ErrorIs(t, nilLease.Err(), ErrLost)
	require.ErrorIs(t, nilLease.Release(ctx), ErrNotHeld)
	require.Equal(t, fence.None, nilLease.Token())
}

func TestRacingClientsExactlyOneWins(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		const racers = 16
		ttl := 10 * time.Second
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []*Lease
			held    int
		)
		start := make(chan struct{})
		for range racers {
			wg.Go(func() {
				// Each racer has its own Client, as separate replicas do.
				c, err := New(s.rdb, Options{Prefix: s.prefix})
				if err != nil {
					t.Error(err)
					return
				}
				<-start
				l, err := c.TryAcquire(context.Background(), "race", ttl)
				mu.Lock()
				defer mu.Unlock()
				var nae *NotAcquiredError
				switch {
				case err == nil:
					winners = append(winners, l)
				case errors.As(err, &nae):
					held++
					if nae.RemainingTTL <= 0 || nae.RemainingTTL > ttl {
						t.Errorf("RemainingTTL = %v, want in (0, %v]", nae.RemainingTTL, ttl)
					}
				default:
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
		require.Len(t, winners, 1)
		require.Equal(t, racers-1, held)
		require.Equal(t, racers, s.hook.count("acquire"), "one round trip per attempt")
		release(t, winners[0])
	})
}

func TestTokensStrictlyIncreaseAcrossAcquisitions(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		var last fence.Token
		owners := map[string]bool{}
		for i := range 1000 {
			l, err := s.client.TryAcquire(ctx, "tokens", time.Minute)
			require.NoError(t, err, "acquisition %d", i)
			require.Greater(t, l.Token(), last, "acquisition %d", i)
			require.False(t, owners[l.Owner()], "owner reused")
			require.Len(t, l.Owner(), 32)
			owners[l.Owner()] = true
			last = l.Token()
			release(t, l)
		}
		require.Equal(t, 1000, s.hook.count("acquire"))
	})
}

func TestTokenIsAtLeastServerTimeInMicroseconds(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		before, err := s.rdb.Time(ctx).Result()
		require.NoError(t, err)
		l, err := s.client.TryAcquire(ctx, "clock", time.Minute)
		require.NoError(t, err)
		defer release(t, l)
		require.GreaterOrEqual(t, uint64(l.Token()), uint64(before.UnixMicro()))
		// Losing the counter does not let the next token go back.
		_, fenceKey := KeysOf(s.client, "clock")
		require.NoError(t, s.rdb.Del(ctx, fenceKey).Err())
		release(t, l)
		l2, err := s.client.TryAcquire(ctx, "clock", time.Minute)
		require.NoError(t, err)
		defer release(t, l2)
		require.Greater(t, l2.Token(), l.Token())
	})
}

func TestNonOwnerRenewAndReleaseChangeNothing(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		a, err := s.client.TryAcquire(ctx, "owned", time.Minute)
		require.NoError(t, err)
		leaseKey, fenceKey := KeysOf(s.client, "owned")
		// a's key vanishes (expiry, eviction) and b takes the lease.
		require.NoError(t, s.rdb.Del(ctx, leaseKey).Err())
		b, err := s.client.TryAcquire(ctx, "owned", 5*time.Second)
		require.NoError(t, err)
		defer release(t, b)
		tokenBefore, err := s.rdb.Get(ctx, fenceKey).Result()
		require.NoError(t, err)

		require.ErrorIs(t, a.Renew(ctx), ErrNotHeld)
		require.ErrorIs(t, a.Err(), ErrNotHeld, "a is lost with the renew's cause")
		require.ErrorIs(t, a.Release(ctx), ErrNotHeld)

		owner, err := s.rdb.Get(ctx, leaseKey).Result()
		require.NoError(t, err)
		require.Equal(t, b.Owner(), owner)
		pttl, err := s.rdb.PTTL(ctx, leaseKey).Result()
		require.NoError(t, err)
		require.LessOrEqual(t, pttl, 5*time.Second, "a's renew must not extend b's key")
		tokenAfter, err := s.rdb.Get(ctx, fenceKey).Result()
		require.NoError(t, err)
		require.Equal(t, tokenBefore, tokenAfter, "renew and release never change the token")
		require.NoError(t, b.Err())
	})
}

func TestReleaseCancelsContextFirstAndIsIdempotent(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		l, err := s.client.TryAcquire(ctx, "rel", time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Err())
		h, ok := fence.HolderFromContext(l.Context())
		require.True(t, ok)
		require.Equal(t, fence.Holder{Scope: "rel", Token: l.Token(), Owner: l.Owner()}, h)
		require.Equal(t, h, l.Holder())

		require.NoError(t, l.Release(ctx))
		require.NoError(t, l.Release(ctx), "second Release returns the first result")
		testwait.Done(t, l.Done(), time.Second, "Done after Release")
		require.ErrorIs(t, l.Err(), ErrLost)
		require.ErrorIs(t, l.Err(), ErrReleased)
		var lost *LostError
		require.ErrorAs(t, context.Cause(l.Context()), &lost)
		require.Equal(t, "rel", lost.Name)
		leaseKey, _ := KeysOf(s.client, "rel")
		n, err := s.rdb.Exists(ctx, leaseKey).Result()
		require.NoError(t, err)
		require.Zero(t, n)
		require.Equal(t, 1, s.hook.count("release"))
		require.ErrorIs(t, l.Renew(ctx), ErrReleased)
	})
}

func TestKeepAliveHoldsLeasePastItsTTL(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		ttl := 600 * time.Millisecond
		start := time.Now()
		l := tryAcquire(t, s.client, "kept", ttl)
		defer release(t, l)
		testwait.Until(t, 20*time.Second, "4 renewals", func() bool { return s.hook.count("renew") >= 4 })
		require.Greater(t, time.Since(start), ttl)
		require.NoError(t, l.Err())
		leaseKey, _ := KeysOf(s.client, "kept")
		owner, err := s.rdb.Get(ctx, leaseKey).Result()
		require.NoError(t, err)
		require.Equal(t, l.Owner(), owner)
		require.True(t, l.Deadline().After(start.Add(ttl)), "the trust window moved forward")
	})
}

func TestKeyDeletedIsReportedLostOnNextRenew(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		l, err := s.client.TryAcquire(ctx, "deleted", 2*time.Second)
		require.NoError(t, err)
		leaseKey, _ := KeysOf(s.client, "deleted")
		require.NoError(t, s.rdb.Set(ctx, leaseKey, "someone-else", time.Minute).Err())
		testwait.Done(t, l.Done(), 5*time.Second, "loss after overwrite")
		require.ErrorIs(t, l.Err(), ErrNotHeld)
		require.ErrorIs(t, l.Release(ctx), ErrNotHeld)
		owner, err := s.rdb.Get(ctx, leaseKey).Result()
		require.NoError(t, err)
		require.Equal(t, "someone-else", owner, "release of a lost lease deletes nothing")
	})
}

func TestBlockedRenewalsEndTheLeaseAtTheTrustWindow(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		ttl := 300 * time.Millisecond
		s.hook.block()
		l := tryAcquire(t, s.client, "hung", ttl)
		deadline := l.Deadline()
		testwait.Done(t, l.Done(), 5*time.Second, "loss while renewals hang")
		require.False(t, time.Now().Before(deadline), "lost before the trust window ended")
		require.ErrorIs(t, l.Err(), ErrExpired)
		require.Equal(t, deadline, l.Deadline(), "a renew that never answered must not move the window")
		_ = l.Release(ctx)
	})
}

func TestAcquireWaitsForTheHolder(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		a, err := s.client.TryAcquire(ctx, "wait", time.Minute)
		require.NoError(t, err)

		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_, err = s.client.Acquire(short, "wait", time.Minute)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, err, ErrNotAcquired)

		got := make(chan *Lease, 1)
		errc := make(chan error, 1)
		go func() {
			l, err := s.client.Acquire(ctx, "wait", time.Minute)
			got <- l
			errc <- err
		}()
		testwait.Until(t, 10*time.Second, "waiter tried", func() bool { return s.hook.count("acquire") >= 3 })
		release(t, a)
		b := <-got
		require.NoError(t, <-errc)
		require.Greater(t, b.Token(), a.Token())
		release(t, b)
	})
}

func TestLifetimeContextEndLosesAndReleasesTheLease(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		app, cancel := context.WithCancel(context.Background())
		l, err := s.client.TryAcquire(context.Background(), "lifetime", time.Minute, WithLifetime(app))
		require.NoError(t, err)
		cancel()
		testwait.Done(t, l.Done(), 5*time.Second, "loss after the lifetime context's cancel")
		require.ErrorIs(t, l.Err(), ErrParentDone)
		require.ErrorIs(t, l.Err(), context.Canceled)
		leaseKey, _ := KeysOf(s.client, "lifetime")
		testwait.Until(t, 5*time.Second, "key released", func() bool {
			n, err := s.rdb.Exists(context.Background(), leaseKey).Result()
			return err == nil && n == 0
		})
		require.NoError(t, l.Release(context.Background()), "Release reports the keep-alive's release")
	})
}

// Issue 11, part 4: Acquire(ctx) under context.WithTimeout(ctx, 300ms) lost
// the lease at 300 ms (ErrParentDone). The deadline bounds the wait only.
func TestAcquireDeadlineBoundsTheWaitNotTheLease(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		type key struct{}
		base := context.WithValue(context.Background(), key{}, "request-7")
		wait, cancel := context.WithTimeout(base, 300*time.Millisecond)
		defer cancel()
		l, err := s.client.Acquire(wait, "wait-bound", time.Minute)
		require.NoError(t, err)
		t.Cleanup(func() { _ = l.Release(context.Background()) })
		<-wait.Done()
		require.ErrorIs(t, wait.Err(), context.DeadlineExceeded)
		require.NoError(t, l.Renew(context.Background()), "the lease outlives the wait's deadline")
		require.NoError(t, l.Err())
		require.NoError(t, l.Context().Err())
		require.Equal(t, "request-7", l.Context().Value(key{}), "and keeps its values")
		leaseKey, _ := KeysOf(s.client, "wait-bound")
		owner, err := s.rdb.Get(context.Background(), leaseKey).Result()
		require.NoError(t, err)
		require.Equal(t, l.Owner(), owner)
	})
}

// A lifetime context that ended before the acquire loses the lease at once
// and frees the key.
func TestEndedLifetimeContextLosesTheLeaseAtOnce(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		app, cancel := context.WithCancelCause(context.Background())
		stop := errors.New("shutting down")
		cancel(stop)
		l, err := s.client.TryAcquire(context.Background(), "ended-lifetime", time.Minute, WithLifetime(app), nil)
		require.NoError(t, err)
		testwait.Done(t, l.Done(), 5*time.Second, "loss of a lease whose lifetime had ended")
		require.ErrorIs(t, l.Err(), ErrParentDone)
		require.ErrorIs(t, l.Err(), stop, "the lifetime context's cause is joined")
		require.NoError(t, l.Release(context.Background()))
	})
}

// heldThenHung is a Backend whose lease is held by another owner for the
// first try, and whose later tries hang until their context ends.
type heldThenHung struct{ tries atomic.Int32 }

func (b *heldThenHung) Acquire(ctx context.Context, _, _ string, _ time.Duration) (Grant, error) {
	if b.tries.Add(1) == 1 {
		return Grant{Remaining: time.Millisecond}, nil
	}
	<-ctx.Done()
	return Grant{}, ctx.Err()
}
func (b *heldThenHung) Renew(_ context.Context, batch []Held) []error {
	return make([]error, len(batch))
}
func (b *heldThenHung) Release(context.Context, Held) error { return nil }

// Issue 11, part 7 (TestConformance/AcquireGivesUpWhenContextEnds on the
// quorum backend under load): when ctx ended while a try was on its way,
// Acquire returned that try's context error alone. The wait ran out either
// way: both errors match.
func TestAcquireEndingDuringATryJoinsTheLastRefusal(t *testing.T) {
	t.Parallel()
	b := &heldThenHung{}
	c, err := NewWithBackend(b, Options{RetryMin: time.Millisecond, RetryMax: time.Millisecond})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	l, err := c.Acquire(ctx, "hung", time.Minute)
	require.Nil(t, l)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, ErrNotAcquired, "joined with the last refusal")
	require.GreaterOrEqual(t, b.tries.Load(), int32(2))
}
