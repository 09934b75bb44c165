package leasetest_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasejoin"
	"github.com/holdfast-go/holdfast/lease/leasetest"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

// newClient returns a lease Client over a fresh miniredis, the Redis
// client it uses, and the miniredis.
func newClient(t *testing.T) (*lease.Client, redis.UniversalClient, *miniredis.Miniredis) {
	t.Helper()
	rdb, mr := leasetest.NewMiniredisClient(t)
	c, err := lease.New(rdb, lease.Options{})
	require.NoError(t, err)
	return c, rdb, mr
}

func release(t *testing.T, l *lease.Lease) {
	t.Helper()
	t.Cleanup(func() { _ = l.Release(context.Background()) })
}

func TestDriveClockExpiresMiniredisKeysWithTheWallClock(t *testing.T) {
	t.Parallel()
	c, rdb, mr := newClient(t)
	ctx := context.Background()
	leasetest.DriveClock(t, mr)
	l := leasetest.TryAcquire(t, c, "driven", 100*time.Millisecond)
	release(t, l)
	leasetest.Freeze(l) // no renewals: only the driven clock can free the key
	leaseKey := leaseKeyOf(t, c, "driven")
	testwait.Until(t, 5*time.Second, "key expired", func() bool {
		n, err := rdb.Exists(ctx, leaseKey).Result()
		return err == nil && n == 0
	})
	l2, err := c.TryAcquire(ctx, "driven", time.Minute)
	require.NoError(t, err)
	release(t, l2)
	require.Greater(t, l2.Token(), l.Token())
}

// heldCounter is a lease.Observer counting refused attempts.
type heldCounter struct{ n atomic.Int64 }

func (o *heldCounter) ObserveAcquire(_ string, err error, _ time.Duration) {
	if errors.Is(err, lease.ErrNotAcquired) {
		o.n.Add(1)
	}
}
func (o *heldCounter) ObserveRenew(string, error, time.Duration) {}
func (o *heldCounter) ObserveLoss(string, error)                 {}
func (o *heldCounter) ObserveEvictions(int64)                    {}

func TestForceExpireHandsOverAndWakesAWaiter(t *testing.T) {
	t.Parallel()
	c, rdb, _ := newClient(t)
	ctx := context.Background()
	require.NoError(t, leasetest.ForceExpire(ctx, rdb, c, "nobody"), "no key: nothing to do")

	a, err := c.TryAcquire(ctx, "job", time.Minute)
	require.NoError(t, err)
	release(t, a)
	// A waiter that would retry only after a minute.
	obs := &heldCounter{}
	slow, err := lease.New(rdb, lease.Options{RetryMin: time.Minute, RetryMax: time.Minute, Observer: obs})
	require.NoError(t, err)
	got := make(chan *lease.Lease, 1)
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	go func() {
		l, _ := slow.Acquire(wctx, "job", time.Minute)
		got <- l
	}()
	// Its second attempt follows its subscription to the release.
	testwait.Until(t, 10*time.Second, "waiter subscribed", func() bool { return obs.n.Load() >= 2 })
	require.NoError(t, leasetest.ForceExpire(ctx, rdb, c, "job"))
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case b := <-got:
		require.NotNil(t, b)
		release(t, b)
		require.Greater(t, b.Token(), a.Token())
	case <-timer.C:
		cancel()
		<-got
		t.Fatal("waiter not woken by ForceExpire")
	}
	// The old holder learns at its next renew.
	require.NoError(t, a.Err())
	require.ErrorIs(t, a.Renew(ctx), lease.ErrNotHeld)
	require.ErrorIs(t, a.Err(), lease.ErrNotHeld)
}

func TestFreezeAndThawOfNilOrLostLeasesDoNothing(t *testing.T) {
	t.Parallel()
	leasetest.Freeze(nil)
	leasetest.Thaw(nil)
	c, _, _ := newClient(t)
	l, err := c.TryAcquire(context.Background(), "lost", time.Minute)
	require.NoError(t, err)
	require.NoError(t, l.Release(context.Background()))
	leasetest.Freeze(l)
	leasetest.Thaw(l)
	leasetest.Thaw(l)
	require.ErrorIs(t, l.Err(), lease.ErrReleased)
}

func TestThawWithinTheWindowKeepsTheLease(t *testing.T) {
	t.Parallel()
	c, _, _ := newClient(t)
	ctx := context.Background()
	l, err := c.TryAcquire(ctx, "short-pause", time.Minute)
	require.NoError(t, err)
	release(t, l)
	leasetest.Freeze(l)
	leasetest.Thaw(l)
	require.NoError(t, l.Err())
	require.NoError(t, l.Renew(ctx), "the key is still ours")
}

func TestRestartedRedisForgetsTheLeaseButNotTheTokenOrder(t *testing.T) {
	t.Parallel()
	srv := leasetest.StartRedis(t)
	rdb := srv.Client(t)
	c, err := lease.New(rdb, lease.Options{})
	require.NoError(t, err)
	ctx := context.Background()
	a, err := c.TryAcquire(ctx, "job", time.Minute)
	require.NoError(t, err)
	release(t, a)

	srv.Restart(t)
	// The key and the fence counter are gone: another acquirer succeeds
	// (the first command on a dead pooled connection may fail).
	var b *lease.Lease
	testwait.Until(t, 10*time.Second, "acquire after restart", func() bool {
		b, err = c.TryAcquire(ctx, "job", time.Minute)
		return err == nil
	})
	release(t, b)
	require.Greater(t, b.Token(), a.Token(), "tokens never fall below Redis TIME in microseconds")
	require.ErrorIs(t, a.Renew(ctx), lease.ErrNotHeld)
}

func TestKilledRedisEndsTheLeaseAtItsTrustWindow(t *testing.T) {
	t.Parallel()
	srv := leasetest.StartRedis(t)
	rdb := srv.Client(t)
	c, err := lease.New(rdb, lease.Options{})
	require.NoError(t, err)
	l := leasetest.TryAcquire(t, c, "job", time.Second)
	release(t, l)
	deadline := l.Deadline()
	srv.Kill(t)
	testwait.Done(t, l.Done(), 5*time.Second, "loss while Redis is down")
	require.ErrorIs(t, l.Err(), lease.ErrExpired)
	require.False(t, time.Now().Before(deadline))
}

// leaseKeyOf returns the lease key of name on a Client made by lease.New.
func leaseKeyOf(t *testing.T, c *lease.Client, name string) string {
	t.Helper()
	rb, ok := leasejoin.Backend(c).(*redislease.Backend)
	require.True(t, ok, "a Client of lease.New")
	k, err := rb.Keys(name)
	require.NoError(t, err)
	return k.Lease
}
