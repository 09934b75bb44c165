package miniconf_test

import (
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdfast-go/holdfast/internal/miniconf"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A miniredis answers CONFIG GET as a default Redis once registered, and
// a second Register is harmless.
func TestRegisterAnswersConfigGetAsADefaultRedis(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	require.Error(t, rdb.ConfigGet(t.Context(), "maxmemory*").Err(), "miniredis has no CONFIG")
	miniconf.Register(mr)
	miniconf.Register(mr)
	got, err := rdb.ConfigGet(t.Context(), "maxmemory*").Result()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"maxmemory": "0", "maxmemory-policy": "noeviction"}, got)
	got, err = rdb.ConfigGet(t.Context(), "maxmemory-policy").Result()
	require.NoError(t, err)
	require.Equal(t, map[string]string{"maxmemory-policy": "noeviction"}, got)
	require.Error(t, rdb.ConfigSet(t.Context(), "maxmemory", "1").Err())
}
