package leasedrivertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
)

// RequireNilContextRefused checks that b refuses a nil context with
// lease.ErrNilContext in Acquire, Renew (one error per lease) and Release,
// and in Inspect and List when b is a leasedriver.Inspector, and that the
// refusals changed nothing: it takes the lease name for owner "owner-a"
// first, and reads it held by that owner afterwards (through Inspect),
// and name+"-2", asked for with a nil context only, never acquired.
func RequireNilContextRefused(t *testing.T, b leasedriver.Backend, name string) {
	t.Helper()
	ctx := t.Context()
	g, err := b.Acquire(ctx, name, "owner-a", time.Minute)
	require.NoError(t, err)
	require.True(t, g.Acquired)
	h := leasedriver.Held{Name: name, Owner: "owner-a", TTL: time.Minute, Handle: g.Handle}
	var nilCtx context.Context
	_, err = b.Acquire(nilCtx, name+"-2", "owner-b", time.Minute)
	require.ErrorIs(t, err, lease.ErrNilContext)
	errs := b.Renew(nilCtx, []leasedriver.Held{h, h})
	require.Len(t, errs, 2)
	for _, err := range errs {
		require.ErrorIs(t, err, lease.ErrNilContext)
	}
	require.ErrorIs(t, b.Release(nilCtx, h), lease.ErrNilContext)
	in, ok := b.(leasedriver.Inspector)
	if !ok {
		return
	}
	_, err = in.Inspect(nilCtx, name)
	require.ErrorIs(t, err, lease.ErrNilContext)
	_, err = in.List(nilCtx, "", 10)
	require.ErrorIs(t, err, lease.ErrNilContext)
	info, err := in.Inspect(ctx, name)
	require.NoError(t, err)
	require.True(t, info.Held, "still held by the first acquisition")
	require.Equal(t, fence.OwnerID("owner-a"), info.OwnerID)
	info, err = in.Inspect(ctx, name+"-2")
	require.NoError(t, err)
	require.False(t, info.Held, "never acquired")
}
