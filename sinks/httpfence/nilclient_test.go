package httpfence

import (
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

func TestMiddlewareRefusesStoresOverNilClients(t *testing.T) {
	t.Parallel()
	_, err := Middleware(MiddlewareConfig{Store: NewRedisStore(nil, "")})
	require.ErrorIs(t, err, ErrInvalidConfig)
	_, err = Middleware(MiddlewareConfig{Store: NewRedisStore((*redis.Client)(nil), "")})
	require.ErrorIs(t, err, ErrInvalidConfig, "a typed nil client")
	_, err = Middleware(MiddlewareConfig{Store: NewMemoryStore(), Fence: NewRedisFence(nil, "")})
	require.ErrorIs(t, err, ErrInvalidConfig)
}
