package redisstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/sinks/httpfence/redisstore"
)

// A Redis that may evict keys is refused before the first write by the
// Store and the Fence; AllowEviction runs anyway; a full noeviction Redis
// says its memory is full.
func TestStoresCheckTheEvictionPolicy(t *testing.T) {
	t.Parallel()
	h := fence.Holder{Token: 7, Owner: "o", Scope: "settle"}
	t.Run("EvictingIsRefused", func(t *testing.T) {
		t.Parallel()
		srv := redisproc.Start(t, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lfu")
		rdb := srv.Client(t)
		st, err := redisstore.NewStore(rdb, redisstore.Options{})
		require.NoError(t, err)
		_, err = st.Begin(t.Context(), "k", "fp", time.Minute)
		require.ErrorIs(t, err, redisstore.ErrEvictionPolicy)
		require.ErrorContains(t, err, "redisstore.Options.Eviction")
		f, err := redisstore.NewFence(rdb, redisstore.Options{})
		require.NoError(t, err)
		require.ErrorIs(t, f.Accept(t.Context(), "acct:1", h), redisstore.ErrEvictionPolicy)
		require.Zero(t, rdb.DBSize(t.Context()).Val(), "nothing written")

		allowed, err := redisstore.NewFence(rdb, redisstore.Options{Eviction: redisstore.Eviction{AllowEviction: true}})
		require.NoError(t, err)
		require.NoError(t, allowed.Accept(t.Context(), "acct:1", h))
	})
	t.Run("MemoryFull", func(t *testing.T) {
		t.Parallel()
		srv := redisproc.Start(t, "--maxmemory-policy", "noeviction")
		st, err := redisstore.NewStore(srv.Client(t), redisstore.Options{})
		require.NoError(t, err)
		f, err := redisstore.NewFence(srv.Client(t), redisstore.Options{})
		require.NoError(t, err)
		srv.Squeeze(t)
		_, err = st.Begin(t.Context(), "k", "fp", time.Minute)
		require.ErrorIs(t, err, redisstore.ErrRedisMemoryFull)
		require.ErrorContains(t, err, "redis memory is full")
		require.ErrorIs(t, f.Accept(t.Context(), "acct:1", h), redisstore.ErrRedisMemoryFull)
	})
}
