package redislease_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
)

// Every method of the backend that takes a context refuses a nil one
// with lease.ErrNilContext (leasedriver.ErrNilContext), before any I/O
// (go-redis dereferenced it: a panic). The held lease is untouched.
func TestBackendRefusesANilContext(t *testing.T) {
	t.Parallel()
	s := newInspectSetup(t, redistest.Real(t))
	b := s.b
	g := s.acquire(t, "nilctx", "owner-a", time.Minute)
	h := leasedriver.Held{Name: "nilctx", Owner: "owner-a", TTL: time.Minute, Handle: g.Handle}
	var nilCtx context.Context
	_, err := b.Acquire(nilCtx, "nilctx2", "owner-b", time.Minute)
	require.ErrorIs(t, err, lease.ErrNilContext)
	_, err = b.AcquireWaiting(nilCtx, "nilctx2", "owner-b", time.Minute, time.Second)
	require.ErrorIs(t, err, lease.ErrNilContext)
	grants, errs := b.AcquireAll(nilCtx, []leasedriver.AcquireRequest{{Name: "nilctx2", Owner: "owner-b", TTL: time.Minute}})
	require.Len(t, grants, 1)
	require.False(t, grants[0].Acquired)
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], lease.ErrNilContext)
	for _, batch := range [][]error{b.Renew(nilCtx, []leasedriver.Held{h}), b.ReleaseAll(nilCtx, []leasedriver.Held{h})} {
		require.Len(t, batch, 1)
		require.ErrorIs(t, batch[0], lease.ErrNilContext)
	}
	require.ErrorIs(t, b.Release(nilCtx, h), lease.ErrNilContext)
	_, _, err = b.Released(nilCtx, "nilctx")
	require.ErrorIs(t, err, lease.ErrNilContext)
	require.ErrorIs(t, b.CheckPolicy(nilCtx), lease.ErrNilContext)
	require.ErrorIs(t, b.CheckFormat(nilCtx), lease.ErrNilContext)
	_, err = b.Evictions(nilCtx)
	require.ErrorIs(t, err, lease.ErrNilContext)
	_, err = b.Inspect(nilCtx, "nilctx")
	require.ErrorIs(t, err, lease.ErrNilContext)
	_, err = b.List(nilCtx, "", 10)
	require.ErrorIs(t, err, lease.ErrNilContext)

	info, err := b.Inspect(t.Context(), "nilctx")
	require.NoError(t, err)
	require.True(t, info.Held, "still held by the first acquisition")
	require.Equal(t, fence.OwnerID("owner-a"), info.OwnerID)
	info, err = b.Inspect(t.Context(), "nilctx2")
	require.NoError(t, err)
	require.False(t, info.Held, "never acquired")
}
