package redisstore_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/redisstore"
)

func TestConstructorsRefuseNilClients(t *testing.T) {
	t.Parallel()
	_, err := redisstore.NewStore(nil, redisstore.Options{})
	require.ErrorIs(t, err, httpfence.ErrInvalidOptions)
	_, err = redisstore.NewStore((*redis.Client)(nil), redisstore.Options{})
	require.ErrorIs(t, err, httpfence.ErrInvalidOptions, "a typed nil client")
	_, err = redisstore.NewFence(nil, redisstore.Options{})
	require.ErrorIs(t, err, httpfence.ErrInvalidOptions)
	_, err = redisstore.NewFence((*redis.Client)(nil), redisstore.Options{})
	require.ErrorIs(t, err, httpfence.ErrInvalidOptions, "a typed nil client")
}

func TestZeroValuesRefuseWithoutPanicking(t *testing.T) {
	t.Parallel()
	var s *redisstore.Store
	_, err := s.Begin(t.Context(), "k", "fp", time.Minute)
	require.ErrorIs(t, err, httpfence.ErrInvalidOptions)
	require.ErrorIs(t, (&redisstore.Store{}).Abandon(t.Context(), "k", "l"), httpfence.ErrInvalidOptions)
	require.ErrorIs(t, (&redisstore.Fence{}).Accept(t.Context(), "r", fence.Holder{Token: 1, Owner: "a"}), httpfence.ErrInvalidOptions)
}
