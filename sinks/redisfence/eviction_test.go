package redisfence_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/sinks/redisfence"
)

// A Redis that may evict keys is refused before the first write, with the
// sentinel every Redis part shares; AllowEviction runs anyway; a full
// noeviction Redis says its memory is full.
func TestWriterChecksTheEvictionPolicy(t *testing.T) {
	t.Parallel()
	h := fence.Holder{Token: 7, Owner: "o", Scope: "settle"}
	t.Run("EvictingIsRefused", func(t *testing.T) {
		t.Parallel()
		srv := redisproc.Start(t, "--maxmemory", "64mb", "--maxmemory-policy", "volatile-lru")
		rdb := srv.Client(t)
		w, err := redisfence.New(rdb)
		require.NoError(t, err)
		err = w.Set(t.Context(), "acct:1", "v", h, 0)
		require.ErrorIs(t, err, redisfence.ErrEvictionPolicy)
		require.ErrorContains(t, err, "redisfence.Options.Eviction")
		require.ErrorIs(t, w.HSet(t.Context(), "acct:1", map[string]string{"a": "b"}, h), redisfence.ErrEvictionPolicy)
		require.Zero(t, rdb.DBSize(t.Context()).Val(), "nothing written")

		allowed, err := redisfence.NewWithOptions(rdb, redisfence.Options{Eviction: redisfence.Eviction{AllowEviction: true}})
		require.NoError(t, err)
		require.NoError(t, allowed.Set(t.Context(), "acct:1", "v", h, 0))
	})
	t.Run("ConfigRefused", func(t *testing.T) {
		t.Parallel()
		srv := redisproc.Start(t, "--rename-command", "CONFIG", "")
		w, err := redisfence.New(srv.Client(t))
		require.NoError(t, err)
		require.ErrorIs(t, w.Set(t.Context(), "acct:1", "v", h, 0), redisfence.ErrEvictionPolicyUnknown)
		declared, err := redisfence.NewWithOptions(srv.Client(t), redisfence.Options{Eviction: redisfence.Eviction{Policy: "noeviction"}})
		require.NoError(t, err)
		require.NoError(t, declared.Set(t.Context(), "acct:1", "v", h, 0))
		_, err = redisfence.NewWithOptions(srv.Client(t), redisfence.Options{Eviction: redisfence.Eviction{Policy: "lru"}})
		require.ErrorIs(t, err, redisfence.ErrInvalidOptions)
	})
	t.Run("MemoryFull", func(t *testing.T) {
		t.Parallel()
		srv := redisproc.Start(t, "--maxmemory-policy", "noeviction")
		w, err := redisfence.New(srv.Client(t))
		require.NoError(t, err)
		srv.Squeeze(t)
		err = w.Set(t.Context(), "acct:1", "v", h, 0)
		require.ErrorIs(t, err, redisfence.ErrRedisMemoryFull)
		require.ErrorContains(t, err, "redis memory is full")
	})
}
