package luascript_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/autopipe"
	"github.com/holdfast-go/holdfast/internal/luascript"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
)

// incr is a script with a prelude: the parts are joined with newlines.
var incr = luascript.New("local function by(n) return n end", "return redis.call('INCRBY', KEYS[1], by(tonumber(ARGV[1])))")

// onEachBackend runs fn on a real Redis and on miniredis, in parallel,
// with a key of the test's own and incr with the test's name in a
// comment. The real Redis is a redis-server of the test's own
// (redisproc): these tests flush the script cache and count the loads,
// and on the shared server the SCRIPT FLUSH of a test of another package
// running beside them (lease, redisledger) made a script loaded once need
// a second load (TestNoScriptLoadsTheScriptOnce: 2 EVALs where 1 was
// expected, in a clean-clone CI run).
func onEachBackend(t *testing.T, fn func(t *testing.T, rdb redis.UniversalClient, key string, incr *luascript.Script)) {
	t.Helper()
	own := func(t testing.TB) redis.UniversalClient {
		rdb := redis.NewClient(&redis.Options{Addr: redisproc.Start(t).Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		return rdb
	}
	for _, b := range []redistest.Backend{{Name: "redis", New: own}, {Name: "miniredis", New: redistest.Mini}} {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb := b.New(t)
			incr := luascript.New("-- "+t.Name(), "local function by(n) return n end", "return redis.call('INCRBY', KEYS[1], by(tonumber(ARGV[1])))")
			fn(t, rdb, redistest.Prefix(t, rdb)+"n", incr)
		})
	}
}

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
	onEachBackend(t, func(t *testing.T, rdb redis.UniversalClient, key string, incr *luascript.Script) {
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

// Calls batched by an auto-pipeline into one pipeline each meet NOSCRIPT
// after a SCRIPT FLUSH and fall back: each runs the script once.
func TestNoScriptInABatch(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, rdb redis.UniversalClient, key string, incr *luascript.Script) {
		ctx := t.Context()
		require.NoError(t, rdb.ScriptFlush(ctx).Err())
		g := &holdFirst{held: make(chan struct{}), open: make(chan struct{})}
		rdb.AddHook(g)
		auto := autopipe.NewInFlight(rdb, 1)
		const calls = 5
		got := make(chan int64, calls)
		for i := range calls {
			go func() {
				if i > 0 {
					<-g.held
				}
				n, err := incr.Run(ctx, auto, []string{key}, 1).Int64()
				if err != nil {
					n = -1
				}
				got <- n
			}()
		}
		<-g.held
		testwait.Until(t, 10*time.Second, "the calls queued", func() bool { return auto.Queued() == calls-1 })
		close(g.open)
		seen := map[int64]bool{}
		for range calls {
			seen[<-got] = true
		}
		require.Equal(t, map[int64]bool{1: true, 2: true, 3: true, 4: true, 5: true}, seen, "each call ran the script once")
		require.Positive(t, g.pipelined.Load(), "the queued calls went out in a pipeline")
		n, err := rdb.Get(ctx, key).Int()
		require.NoError(t, err)
		require.Equal(t, calls, n)
	})
}

// holdFirst holds the first EVALSHA until open is closed and counts the
// commands sent in pipelines.
type holdFirst struct {
	held, open chan struct{}
	once       sync.Once
	pipelined  atomic.Int64
}

func (h *holdFirst) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "evalsha" {
			h.once.Do(func() { close(h.held); <-h.open })
		}
		return next(ctx, cmd)
	}
}

func (h *holdFirst) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.pipelined.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// evalCounter counts the EVAL commands a client sends, in pipelines too.
type evalCounter struct{ n atomic.Int64 }

func (e *evalCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (e *evalCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "eval" {
			e.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (e *evalCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if cmd.Name() == "eval" {
				e.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}

// The calls that meet NOSCRIPT together load the script about once: the
// replies of one pipeline, fallen back one after another (Replies), send
// one EVAL and then EVALSHA; concurrent calls wait for the EVAL in flight.
// Each runs the script once.
func TestNoScriptLoadsTheScriptOnce(t *testing.T) {
	t.Parallel()
	onEachBackend(t, func(t *testing.T, rdb redis.UniversalClient, key string, incr *luascript.Script) {
		ctx := t.Context()
		evals := &evalCounter{}
		rdb.AddHook(evals)
		const calls = 16

		require.NoError(t, rdb.ScriptFlush(ctx).Err())
		pipe := rdb.Pipeline()
		cmds := make([]*redis.Cmd, calls)
		for i := range cmds {
			cmds[i] = incr.Queue(ctx, pipe, incr.Prepared([]string{key}, 1))
		}
		_, _ = pipe.Exec(ctx)
		seen := map[int64]bool{}
		replies := incr.Replies()
		for _, cmd := range cmds {
			require.True(t, luascript.IsNoScript(cmd.Err()), "the pipeline met NOSCRIPT: %v", cmd.Err())
			n, err := replies.Fallback(ctx, rdb, cmd).Int64()
			require.NoError(t, err)
			seen[n] = true
		}
		require.Len(t, seen, calls, "each call ran the script once")
		require.Equal(t, int64(1), evals.n.Load(), "EVALs for the pipeline's replies")

		// Concurrent calls, after another flush: the first to fall
		// back loads the script, the ones that fall back meanwhile
		// wait for it. A call that finds no load in flight, and the
		// script not loaded, sends EVAL itself, so only fewer EVALs
		// than calls is certain.
		evals.n.Store(0)
		require.NoError(t, rdb.ScriptFlush(ctx).Err())
		auto := autopipe.New(rdb)
		var wg sync.WaitGroup
		got := make(chan int64, calls)
		for range calls {
			wg.Go(func() {
				n, err := incr.Run(ctx, auto, []string{key}, 1).Int64()
				if err != nil {
					n = -1
				}
				got <- n
			})
		}
		wg.Wait()
		close(got)
		for n := range got {
			require.Positive(t, n)
			seen[n] = true
		}
		require.Len(t, seen, 2*calls, "each call ran the script once")
		require.Less(t, evals.n.Load(), int64(calls), "EVALs for %d concurrent calls", calls)
		n, err := rdb.Get(ctx, key).Int()
		require.NoError(t, err)
		require.Equal(t, 2*calls, n)
	})
}

// A load in flight on one server does not hold up a call that met
// NOSCRIPT on another (the masters of lease/quorum, each its own client):
// waiting for it, and then sending EVALSHA, cost that server a wasted
// round trip (EVALSHA, EVALSHA, EVAL: seen as 3 commands for a release in
// quorum's FailedTryIsOneCommand, which allows 2 on a cold script cache).
// Here server a's EVAL is held while the call on server b falls back: b
// sends its own EVAL at once, 2 commands in all.
func TestLoadOnOneServerDoesNotHoldUpAnother(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := redis.NewClient(&redis.Options{Addr: redisproc.Start(t).Addr()})
	b := redis.NewClient(&redis.Options{Addr: redisproc.Start(t).Addr()})
	t.Cleanup(func() { _, _ = a.Close(), b.Close() })
	script := luascript.New("-- "+t.Name(), "return redis.call('INCRBY', KEYS[1], ARGV[1])")
	held := &holdEval{held: make(chan struct{}), open: make(chan struct{})}
	a.AddHook(held)
	onB := &commandCounter{}
	b.AddHook(onB)

	var release sync.Once
	open := func() { release.Do(func() { close(held.open) }) }
	t.Cleanup(open)
	doneA := make(chan error, 1)
	go func() { doneA <- script.Run(ctx, a, []string{"n"}, 1).Err() }()
	testwait.Done(t, held.held, 5*time.Second, "the EVAL on server a is in flight")
	doneB := make(chan struct{})
	var (
		n   int64
		err error
	)
	go func() {
		defer close(doneB)
		n, err = script.Run(ctx, b, []string{"n"}, 1).Int64()
	}()
	testwait.Done(t, doneB, 5*time.Second, "server b's call returned while a's load is held")
	require.NoError(t, err)
	require.Equal(t, int64(1), n)
	require.Equal(t, int64(2), onB.n.Load(), "server b: EVALSHA (NOSCRIPT), then EVAL")
	open()
	require.NoError(t, <-doneA)
}

// holdEval holds the first EVAL until open is closed.
type holdEval struct {
	held, open chan struct{}
	once       sync.Once
}

func (h *holdEval) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *holdEval) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "eval" {
			h.once.Do(func() { close(h.held); <-h.open })
		}
		return next(ctx, cmd)
	}
}

func (h *holdEval) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// commandCounter counts the EVAL and EVALSHA commands a client sends on
// their own.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "eval" || name == "evalsha" {
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
