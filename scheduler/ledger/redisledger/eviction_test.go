package redisledger_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/redislease"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// A Redis that may evict keys is refused before the first write, by the
// ledger and by ClaimAll (whose script takes leases too); AllowEviction
// runs anyway; a full noeviction Redis says its memory is full.
func TestLedgerChecksTheEvictionPolicy(t *testing.T) {
	t.Parallel()
	at := time.Unix(1780000000, 0).UTC()
	slot := ledger.Slot{Job: "settle", At: at}
	f := ledger.Fence{Scope: ledger.UnitScope("settle", ""), Token: 7, Owner: "o"}

	t.Run("EvictingIsRefused", func(t *testing.T) {
		t.Parallel()
		srv := redisproc.Start(t, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")
		rdb := srv.Client(t)
		l, err := redisledger.New(rdb, redisledger.Options{})
		require.NoError(t, err)
		_, _, err = l.Begin(t.Context(), slot, f, 3, at)
		require.ErrorIs(t, err, redisledger.ErrEvictionPolicy)
		require.ErrorIs(t, err, redislease.ErrEvictionPolicy, "one sentinel for every Redis part")
		require.ErrorContains(t, err, "redisledger.Options.Eviction")
		require.ErrorIs(t, l.Skip(t.Context(), slot, f, ledger.StatusSkipped, "x", at), redisledger.ErrEvictionPolicy)
		require.Zero(t, rdb.DBSize(t.Context()).Val(), "nothing written")

		b, err := redislease.NewBackend(rdb, redislease.Options{})
		require.NoError(t, err)
		_, err = l.ClaimAll(t.Context(), b, []ledger.ClaimRequest{{Lease: leasedriver.AcquireRequest{Name: "settle", Owner: "o", TTL: time.Second}}}, 0, at)
		require.ErrorIs(t, err, redisledger.ErrEvictionPolicy)

		allowed, err := redisledger.New(rdb, redisledger.Options{Eviction: redisledger.Eviction{AllowEviction: true}})
		require.NoError(t, err)
		_, _, err = allowed.Begin(t.Context(), slot, f, 3, at)
		require.NoError(t, err)
		_, err = allowed.ClaimAll(t.Context(), b, []ledger.ClaimRequest{{Lease: leasedriver.AcquireRequest{Name: "settle", Owner: "o", TTL: time.Second}}}, 0, at)
		require.ErrorIs(t, err, redislease.ErrEvictionPolicy, "the lease backend was not allowed")
	})
	t.Run("MemoryFull", func(t *testing.T) {
		t.Parallel()
		srv := redisproc.Start(t, "--maxmemory-policy", "noeviction")
		l, err := redisledger.New(srv.Client(t), redisledger.Options{})
		require.NoError(t, err)
		srv.Squeeze(t)
		_, _, err = l.Begin(t.Context(), slot, f, 3, at)
		require.ErrorIs(t, err, redisledger.ErrRedisMemoryFull)
		require.ErrorContains(t, err, "redis memory is full")
	})
}
