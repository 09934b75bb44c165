package redisarg_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"testing"

	"github.com/redis/go-redis/extra/rediscmd/v9"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redisarg"
	"github.com/holdfast-go/holdfast/internal/redistest"
)

const owner = "c4cf6eb9f6f86911b62410cefdeb973e"

func TestOwnerPrintsRedacted(t *testing.T) {
	t.Parallel()
	o := redisarg.Owner(owner)
	type wrapper struct{ O any }
	for _, verb := range []string{"%v", "%+v", "%s", "%q", "%x", "%#v", "%d"} {
		for _, v := range []any{o, wrapper{o}, []any{"evalsha", o}} {
			got := fmt.Sprintf(verb, v)
			require.NotContains(t, got, owner, "%s of %T", verb, v)
			require.NotContains(t, got, fmt.Sprintf("%x", owner), "%s of %T", verb, v)
		}
	}
	require.Equal(t, "[owner]", fmt.Sprint(o))
	require.Equal(t, `"[owner]"`, fmt.Sprintf("%#v", o))
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("x", "owner", o)
	require.Contains(t, buf.String(), `"owner":"[owner]"`)
	b, err := o.MarshalBinary()
	require.NoError(t, err)
	require.Equal(t, []byte(owner), b)
	b, err = redisarg.Owner("").MarshalBinary()
	require.NoError(t, err)
	require.Empty(t, b)
}

// An Owner reaches Redis as its bytes (a script sees the same ARGV as for
// a string), and every text form of the command shows [owner].
func TestOwnerIsSentAsItsBytes(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb := b.New(t)
			key := redistest.Prefix(t, rdb) + "owner"
			ctx := t.Context()
			set := redis.NewStatusCmd(ctx, "set", key, redisarg.Owner(owner))
			require.NoError(t, rdb.Process(ctx, set))
			require.Equal(t, owner, rdb.Get(ctx, key).Val())
			require.NotContains(t, rediscmd.CmdString(set), owner)
			require.NotContains(t, set.String(), owner)
			require.Contains(t, rediscmd.CmdString(set), "[owner]")

			same := redis.NewScript(`return redis.call('GET', KEYS[1]) == ARGV[1] and 1 or 0`)
			n, err := same.Run(ctx, rdb, []string{key}, redisarg.Owner(owner)).Int()
			require.NoError(t, err)
			require.Equal(t, 1, n, "the script's ARGV is the owner")
			n, err = same.Run(ctx, rdb, []string{key}, redisarg.Owner("")).Int()
			require.NoError(t, err)
			require.Equal(t, 0, n)
		})
	}
}
