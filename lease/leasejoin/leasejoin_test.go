package leasejoin_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/leasejoin"
	"github.com/holdfast-go/holdfast/lease/leasetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestJoinedAcquisitionsAreLeasesOfTheClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := leasetest.NewMemoryBackend(clock.Real())
	c, err := lease.NewWithBackend(b, lease.Options{})
	require.NoError(t, err)

	var got []leasedriver.AcquireRequest
	acquire := func(ctx context.Context, reqs []leasedriver.AcquireRequest) ([]leasedriver.Grant, []error) {
		got = reqs
		grants, errs := make([]leasedriver.Grant, len(reqs)), make([]error, len(reqs))
		grants[0], errs[0] = b.Acquire(ctx, reqs[0].Name, reqs[0].Owner, reqs[0].TTL)
		errs[1] = leasedriver.ErrNotTried
		return grants, errs
	}
	leases, errs := leasejoin.TryAcquireAll(ctx, c, []string{"a", "b", "{bad}"}, time.Minute, acquire)
	require.Len(t, got, 2, "one request per valid name")
	require.Equal(t, "a", got[0].Name)
	require.Equal(t, time.Minute, got[0].TTL)
	require.NoError(t, errs[0])
	require.Equal(t, "a", leases[0].Name())
	require.Equal(t, got[0].Owner, leases[0].Holder().Owner)
	require.ErrorIs(t, errs[1], leasedriver.ErrNotTried)
	require.Nil(t, leases[1])
	require.ErrorIs(t, errs[2], lease.ErrInvalidName)

	// The joined release ends the lease as Release does, once.
	calls := 0
	release := func(ctx context.Context, h leasedriver.Held) error {
		calls++
		require.Equal(t, "a", h.Name)
		return b.Release(ctx, h)
	}
	require.NoError(t, leasejoin.Release(ctx, leases[0], release))
	require.NoError(t, leasejoin.Release(ctx, leases[0], release))
	require.Equal(t, 1, calls)
	require.ErrorIs(t, leases[0].Err(), lease.ErrReleased)
	_, err = c.TryAcquire(ctx, "a", time.Minute)
	require.NoError(t, err, "the release freed the lease")
}

func TestJoinedCallsRefuseAClientNotMadeByNew(t *testing.T) {
	t.Parallel()
	leases, errs := leasejoin.TryAcquireAll(context.Background(), nil, []string{"a"}, time.Minute, nil)
	require.Nil(t, leases[0])
	require.ErrorIs(t, errs[0], lease.ErrNotCreated)
	err := leasejoin.Release(context.Background(), nil, func(context.Context, leasedriver.Held) error { return errors.New("not called") })
	require.ErrorIs(t, err, lease.ErrNotHeld)
}
