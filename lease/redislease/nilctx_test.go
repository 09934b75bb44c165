package redislease_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/leasedriver/leasedrivertest"
)

// Every method of the backend that takes a context refuses a nil one
// with lease.ErrNilContext (leasedriver.ErrNilContext), before any I/O
// (go-redis dereferenced it: a panic). The held lease is untouched.
func TestBackendRefusesANilContext(t *testing.T) {
	t.Parallel()
	b := newInspectSetup(t, redistest.Real(t)).b
	leasedrivertest.RequireNilContextRefused(t, b, "nilctx")
	var nilCtx context.Context
	_, err := b.AcquireWaiting(nilCtx, "nilctx-2", "owner-b", time.Minute, time.Second)
	require.ErrorIs(t, err, lease.ErrNilContext)
	grants, errs := b.AcquireAll(nilCtx, []leasedriver.AcquireRequest{{Name: "nilctx-2", Owner: "owner-b", TTL: time.Minute}})
	require.Len(t, grants, 1)
	require.False(t, grants[0].Acquired)
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], lease.ErrNilContext)
	errs = b.ReleaseAll(nilCtx, []leasedriver.Held{{Name: "nilctx", Owner: "owner-a", TTL: time.Minute}})
	require.Len(t, errs, 1)
	require.ErrorIs(t, errs[0], lease.ErrNilContext)
	_, _, err = b.Released(nilCtx, "nilctx")
	require.ErrorIs(t, err, lease.ErrNilContext)
	require.ErrorIs(t, b.CheckPolicy(nilCtx), lease.ErrNilContext)
	require.ErrorIs(t, b.CheckFormat(nilCtx), lease.ErrNilContext)
	_, err = b.Evictions(nilCtx)
	require.ErrorIs(t, err, lease.ErrNilContext)
}
