package leasetest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/leasedriver/leasedrivertest"
	"github.com/holdfast-go/holdfast/lease/leasetest"
)

// memoryStore describes a fresh MemoryBackend on clk to the suite: its
// Clients share it (each through a WithHolder view of its label), Expire
// is MemoryBackend.Expire, Inspect MemoryBackend.Holder, HolderLabel
// MemoryBackend.Label, Commands MemoryBackend.Calls.
func memoryStore(clk clock.Clock) func(t *testing.T) leasedrivertest.Store {
	return func(t *testing.T) leasedrivertest.Store {
		b := leasetest.NewMemoryBackend(clk)
		return leasedrivertest.Store{
			NewClient: func(t *testing.T, opts lease.Options) *lease.Client {
				t.Helper()
				view, err := b.WithHolder(opts.Holder)
				require.NoError(t, err)
				c, err := lease.NewWithBackend(view, opts)
				require.NoError(t, err)
				return c
			},
			Expire: func(_ context.Context, name string) error {
				b.Expire(name)
				return nil
			},
			Inspect: func(_ context.Context, name string) (string, time.Duration, error) {
				owner, ttl := b.Holder(name)
				return owner, ttl, nil
			},
			HolderLabel: func(_ context.Context, name string) (string, error) {
				return b.Label(name), nil
			},
			Commands: b.Calls,
		}
	}
}

// TestMemoryBackendConformance: the in-memory backend meets the lease
// contract, on the real clock (the Client's timers are real ones).
func TestMemoryBackendConformance(t *testing.T) {
	t.Parallel()
	leasedrivertest.Exercise(t, memoryStore(clock.Real()))
}

// A fake clock expires a lease nobody renews: tokens keep increasing, a
// holder's Renew and Release after its TTL are refused, and Holder
// reports the remaining TTL on the fake clock.
func TestMemoryBackendExpiresByItsClock(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 3, 8, 2, 0, 0, 0, time.UTC))
	b := leasetest.NewMemoryBackend(clk)
	ctx := context.Background()
	g, err := b.Acquire(ctx, "job", "a", time.Minute)
	require.NoError(t, err)
	require.True(t, g.Acquired)
	clk.Advance(20 * time.Second)
	owner, ttl := b.Holder("job")
	require.Equal(t, "a", owner)
	require.Equal(t, 40*time.Second, ttl)
	refused, err := b.Acquire(ctx, "job", "b", time.Minute)
	require.NoError(t, err)
	require.False(t, refused.Acquired)
	require.Equal(t, 40*time.Second, refused.Remaining)

	clk.Advance(40 * time.Second) // the TTL has passed
	owner, _ = b.Holder("job")
	require.Empty(t, owner)
	held := leasedriver.Held{Name: "job", Owner: "a", TTL: time.Minute}
	require.ErrorIs(t, b.Renew(ctx, []leasedriver.Held{held})[0], lease.ErrNotHeld)
	require.ErrorIs(t, b.Release(ctx, held), lease.ErrNotHeld)
	g2, err := b.Acquire(ctx, "job", "b", time.Minute)
	require.NoError(t, err)
	require.True(t, g2.Acquired)
	require.Greater(t, g2.Token, g.Token)
}

// A release wakes the listeners of its name only; an expiry by time wakes
// nobody (waiters poll on the remaining TTL), Expire does.
func TestMemoryBackendNotifiesReleases(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 3, 8, 2, 0, 0, 0, time.UTC))
	b := leasetest.NewMemoryBackend(clk)
	ctx := context.Background()
	job, stopJob, err := b.Released(ctx, "job")
	require.NoError(t, err)
	defer stopJob()
	other, stopOther, err := b.Released(ctx, "other")
	require.NoError(t, err)
	defer stopOther()

	_, err = b.Acquire(ctx, "job", "a", time.Minute)
	require.NoError(t, err)
	require.NoError(t, b.Release(ctx, leasedriver.Held{Name: "job", Owner: "a", TTL: time.Minute}))
	requireSignaled(t, job, true, "release of job")
	requireSignaled(t, other, false, "release of job, listener of other")

	_, err = b.Acquire(ctx, "job", "b", time.Minute)
	require.NoError(t, err)
	clk.Advance(time.Minute)
	_, err = b.Acquire(ctx, "job", "c", time.Minute) // finds b's lease expired
	require.NoError(t, err)
	requireSignaled(t, job, false, "expiry by time")
	b.Expire("job")
	requireSignaled(t, job, true, "Expire")

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, _, err = b.Released(canceled, "job")
	require.ErrorIs(t, err, context.Canceled)
}

// requireSignaled checks whether ch holds a notification, without
// waiting: MemoryBackend notifies before its call returns.
func requireSignaled(t *testing.T, ch <-chan struct{}, want bool, what string) {
	t.Helper()
	select {
	case <-ch:
		require.True(t, want, "%s: unexpected notification", what)
	default:
		require.False(t, want, "%s: no notification", what)
	}
}
