package lease

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/redislease"
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

// The lease contract (racing acquirers, token order, non-owner renew and
// release, release, keep-alive, a deleted key, the lifetime and acquire
// contexts, waiting, bad input) is checked by leasedrivertest.Exercise, which
// TestConformance runs on real Redis, miniredis and the other
// deployments. The tests below check what the suite does not: the Redis
// backend's own properties, and the Client on hand-made backends.

func TestNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	rdb := redistest.Mini(t)
	_, err := New(nil, Options{})
	require.ErrorIs(t, err, leasedriver.ErrNilClient)
	_, err = New((*redis.Client)(nil), Options{})
	require.ErrorIs(t, err, leasedriver.ErrNilClient, "a typed nil client")
	require.ErrorIs(t, err, ErrInvalidOptions, "a nil client is invalid options, as every refusal of New")
	_, err = New(rdb, Options{Prefix: "a{b}:"})
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = New(rdb, Options{RetryMin: time.Second, RetryMax: time.Millisecond})
	require.ErrorIs(t, err, ErrInvalidOptions)

	// NewWithBackend: the backend owns its keys and replication.
	b, err := redislease.NewBackend(rdb, redislease.Options{})
	require.NoError(t, err)
	_, err = NewWithBackend(nil, Options{})
	require.ErrorIs(t, err, leasedriver.ErrNilClient)
	require.ErrorContains(t, err, "nil backend")
	_, err = NewWithBackend(b, Options{Prefix: "app:"})
	require.ErrorIs(t, err, ErrInvalidOptions, "a Prefix is the backend's")
	_, err = NewWithBackend(b, Options{ReplicaAck: redislease.ReplicaAck{Replicas: 1}})
	require.ErrorIs(t, err, ErrInvalidOptions, "a ReplicaAck is the Redis backend's")
	_, err = NewWithBackend(b, Options{})
	require.NoError(t, err)
}

// Misuse is bad input, answered with a typed error, never a panic: a nil or
// zero Client, a zero Lease, a nil context. Nothing is taken or released.
func TestMisuseIsAnErrorNotAPanic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, c := range map[string]*Client{"nil": nil, "zero": {}} {
		_, err := c.TryAcquire(ctx, "a", time.Minute)
		require.ErrorIs(t, err, ErrNotCreated, name)
		_, err = c.Acquire(ctx, "a", time.Minute)
		require.ErrorIs(t, err, ErrNotCreated, name)
		leases, errs := c.TryAcquireAll(ctx, []string{"a", "b"}, time.Minute)
		require.Equal(t, []*Lease{nil, nil}, leases, name)
		for _, err := range errs {
			require.ErrorIs(t, err, ErrNotCreated, name)
		}
	}
	var zero Lease
	require.ErrorIs(t, zero.Err(), ErrNotHeld)
	require.ErrorIs(t, zero.Renew(ctx), ErrNotHeld)
	require.ErrorIs(t, zero.Release(ctx), ErrNotHeld)
	require.Error(t, zero.Context().Err(), "a zero Lease's context is canceled")

	eachBackend(t, func(t *testing.T, s *setup) {
		var nilCtx context.Context
		_, err := s.client.TryAcquire(nilCtx, "nil-ctx", time.Minute)
		require.ErrorIs(t, err, ErrNilContext)
		_, err = s.client.Acquire(nilCtx, "nil-ctx", time.Minute)
		require.ErrorIs(t, err, ErrNilContext)
		_, errs := s.client.TryAcquireAll(nilCtx, []string{"nil-ctx"}, time.Minute)
		require.ErrorIs(t, errs[0], ErrNilContext)
		key, _ := KeysOf(s.client, "nil-ctx")
		require.ErrorIs(t, s.rdb.Get(ctx, key).Err(), redis.Nil, "nothing was taken")

		l := tryAcquire(t, s.client, "nil-ctx", time.Minute)
		require.ErrorIs(t, l.Renew(nilCtx), ErrNilContext)
		require.ErrorIs(t, l.Release(nilCtx), ErrNilContext)
		require.NoError(t, l.Err(), "still held: a refused Release releases nothing")
		owner, err := s.rdb.Get(ctx, key).Result()
		require.NoError(t, err)
		require.Equal(t, l.Holder().Owner, owner)
		release(t, l)
	})
}

// A Release that got no answer can be tried again.
func TestReleaseWithoutAnAnswerCanBeTriedAgain(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		held, err := s.client.TryAcquire(ctx, "retry-release", time.Minute)
		require.NoError(t, err)
		canceled, cancel := context.WithCancel(ctx)
		cancel()
		require.ErrorIs(t, held.Release(canceled), context.Canceled)
		require.NoError(t, held.Release(ctx), "released on the second try")
		leaseKey, _ := KeysOf(s.client, "retry-release")
		n, err := s.rdb.Exists(ctx, leaseKey).Result()
		require.NoError(t, err)
		require.Zero(t, n)
	})
}

// Every attempt, won or refused, is one script call, and so is a release
// (the suite counts the commands of refused attempts only); owners are
// 128-bit hex.
func TestEachAttemptAndReleaseIsOneScriptCall(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		const rounds = 10
		for range rounds {
			l, err := s.client.TryAcquire(ctx, "calls", time.Minute)
			require.NoError(t, err)
			require.Len(t, l.Holder().Owner, 32)
			_, err = s.client.TryAcquire(ctx, "calls", time.Minute)
			require.ErrorIs(t, err, ErrNotAcquired)
			release(t, l)
		}
		require.Equal(t, 2*rounds, s.hook.count("acquire"))
		require.Equal(t, rounds, s.hook.count("release"))
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

func (b *heldThenHung) Acquire(ctx context.Context, _, _ string, _ time.Duration) (leasedriver.Grant, error) {
	if b.tries.Add(1) == 1 {
		return leasedriver.Grant{Remaining: time.Millisecond}, nil
	}
	<-ctx.Done()
	return leasedriver.Grant{}, ctx.Err()
}
func (b *heldThenHung) Renew(_ context.Context, batch []leasedriver.Held) []error {
	return make([]error, len(batch))
}
func (b *heldThenHung) Release(context.Context, leasedriver.Held) error { return nil }

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
	// One line, the wait's end first (errors.Join printed two lines).
	require.True(t, strings.HasPrefix(err.Error(), "context deadline exceeded: lease \"hung\": not acquired"), err.Error())
	require.NotContains(t, err.Error(), "\n")
}
