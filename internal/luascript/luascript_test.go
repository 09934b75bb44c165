package luascript_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/autopipe"
	"github.com/holdfast-go/holdfast/internal/luascript"
	"github.com/holdfast-go/holdfast/internal/redistest"
)

// incr is a script with a prelude: the parts are joined with newlines.
var incr = luascript.New("local function by(n) return n end", "return redis.call('INCRBY', KEYS[1], by(tonumber(ARGV[1])))")

func TestNewJoinsParts(t *testing.T) {
	t.Parallel()
	require.Equal(t, "local function by(n) return n end\nreturn redis.call('INCRBY', KEYS[1], by(tonumber(ARGV[1])))\n", incr.Source())
	require.Len(t, incr.Hash(), 40)
	require.Equal(t, []any{"evalsha", incr.Hash(), 1, "k", 2}, incr.Prepared([]string{"k"}, 2))
}

// Every way to run a script survives a server that lost its script cache,
// and runs the script once.
func TestRunFallsBackOnNoScript(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb := b.New(t)
			key := redistest.Prefix(t, rdb) + "n"
			ctx := t.Context()
			auto := autopipe.New(rdb)
			flushed := false
			flush := func() { require.NoError(t, rdb.ScriptFlush(ctx).Err()); flushed = true }
			want := int64(0)
			for _, run := range []struct {
				name string
				do   func() *redis.Cmd
			}{
				{"Client", func() *redis.Cmd { return incr.Run(ctx, rdb, []string{key}, 1) }},
				{"AutoPipe", func() *redis.Cmd { return incr.Run(ctx, auto, []string{key}, 1) }},
				{"Prepared", func() *redis.Cmd { return incr.RunPrepared(ctx, rdb, incr.Prepared([]string{key}, 1)) }},
				{"Pipeline", func() *redis.Cmd {
					pipe := rdb.Pipeline()
					cmd := incr.Queue(ctx, pipe, incr.Prepared([]string{key}, 1))
					_, _ = pipe.Exec(ctx)
					if flushed {
						require.True(t, luascript.IsNoScript(cmd.Err()), "the pipeline met NOSCRIPT: %v", cmd.Err())
					}
					return incr.Fallback(ctx, rdb, cmd)
				}},
			} {
				flush()
				want++
				n, err := run.do().Int64()
				require.NoError(t, err, run.name)
				require.Equal(t, want, n, "%s ran the script once", run.name)
				flushed = false
				n, err = run.do().Int64() // known now: EVALSHA
				require.NoError(t, err, run.name)
				want++
				require.Equal(t, want, n, run.name)
			}
		})
	}
}

func TestFallbackKeepsOtherErrors(t *testing.T) {
	t.Parallel()
	rdb := redistest.Real(t)
	ctx := t.Context()
	bad := luascript.New("return redis.error_reply('boom')")
	err := bad.Run(ctx, rdb, []string{"k"}).Err()
	require.EqualError(t, err, "ERR boom")
	require.False(t, luascript.IsNoScript(err))
	require.False(t, luascript.IsNoScript(nil))
	require.True(t, luascript.IsNoScript(fmt.Errorf("wrapped: %w", redis.ErrNoScript)))
	require.True(t, luascript.IsNoScript(errors.New("NOSCRIPT No matching script.")))
}
