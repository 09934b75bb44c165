package autopipe

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// gate holds the first plain command until open is closed, and counts
// plain commands and the commands sent in pipelines.
type gate struct {
	held, open  chan struct{}
	once        sync.Once
	plain       atomic.Int64
	pipelines   atomic.Int64
	pipelinedOp atomic.Int64
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "hello" || n == "client" {
			return next(ctx, cmd)
		}
		g.plain.Add(1)
		g.once.Do(func() { close(g.held); <-g.open })
		return next(ctx, cmd)
	}
}

func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() != "client" {
			g.pipelines.Add(1)
			g.pipelinedOp.Add(int64(len(cmds)))
		}
		return next(ctx, cmds)
	}
}

func eachBackend(t *testing.T, fn func(t *testing.T, rdb redis.UniversalClient, prefix string)) {
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb := b.New(t)
			fn(t, rdb, redistest.Prefix(t, rdb))
		})
	}
}

// A lone call is a plain command; the calls made while it is on the wire
// go out together in one pipeline, each with its own answer; then the pipe
// is idle again.
func TestCallsQueuedBehindABatchGoOutInOnePipeline(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		g := &gate{held: make(chan struct{}), open: make(chan struct{})}
		rdb.AddHook(g)
		p := New(rdb)
		first := make(chan error, 1)
		go func() {
			cmd := redis.NewIntCmd(ctx, "incrby", prefix+"first", 7)
			first <- p.Process(ctx, cmd)
		}()
		<-g.held
		const queued = 12
		got := make(chan int64, queued)
		for i := range queued {
			go func() {
				cmd := redis.NewIntCmd(ctx, "incrby", fmt.Sprintf("%sk%d", prefix, i), i+1)
				if err := p.Process(ctx, cmd); err != nil {
					got <- -1
					return
				}
				got <- cmd.Val()
			}()
		}
		testwait.Until(t, 10*time.Second, "the calls queued behind the first", func() bool { return p.Queued() == queued })
		close(g.open)
		require.NoError(t, <-first)
		sum := int64(0)
		for range queued {
			sum += <-got
		}
		require.Equal(t, int64(queued*(queued+1)/2), sum, "each call got its own answer")
		require.Equal(t, int64(1), g.plain.Load(), "the first went out alone, as a plain command")
		require.Equal(t, int64(1), g.pipelines.Load(), "the queued calls went out in one pipeline")
		require.Equal(t, int64(queued), g.pipelinedOp.Load())
		require.True(t, p.Idle())
	})
}

// Under load every call is answered, leadership keeps moving (no caller
// waits for ever), and the pipe ends idle.
func TestEveryCallIsAnsweredUnderLoad(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		p := New(rdb)
		const workers, rounds = 32, 50
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range rounds {
					_ = p.Process(ctx, redis.NewIntCmd(ctx, "incr", prefix+"n"))
				}
			})
		}
		wg.Wait()
		n, err := rdb.Get(ctx, prefix+"n").Int()
		require.NoError(t, err)
		require.Equal(t, workers*rounds, n)
		require.True(t, p.Idle())
	})
}

// A call whose ctx already ended sends nothing and says so.
func TestCanceledCallSendsNothing(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		cmd := redis.NewIntCmd(ctx, "incr", prefix+"never")
		require.ErrorIs(t, New(rdb).Process(ctx, cmd), context.Canceled)
		require.ErrorIs(t, cmd.Err(), context.Canceled)
		require.ErrorIs(t, rdb.Get(context.Background(), prefix+"never").Err(), redis.Nil)
	})
}
