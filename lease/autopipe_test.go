package lease

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

	"github.com/holdfast-go/holdfast/internal/testwait"
)

// gateHook holds the first plain command until open is closed, and counts
// plain commands and pipelines (with their sizes).
type gateHook struct {
	held      chan struct{} // closed when the first command is held
	open      chan struct{}
	once      sync.Once
	plain     atomic.Int64
	pipelines atomic.Int64
	piped     atomic.Int64
}

func (h *gateHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (h *gateHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "hello" || n == "client" {
			return next(ctx, cmd)
		}
		h.plain.Add(1)
		h.once.Do(func() { close(h.held); <-h.open })
		return next(ctx, cmd)
	}
}

func (h *gateHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() != "client" {
			h.pipelines.Add(1)
			h.piped.Add(int64(len(cmds)))
		}
		return next(ctx, cmds)
	}
}

// Acquisitions made while another is on the wire go out together, in one
// pipeline, each with its own answer.
func TestConcurrentAcquiresShareARoundTrip(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		// Load the script first, so that no NOSCRIPT retry runs below.
		warm, err := s.client.TryAcquire(ctx, "warm", time.Second)
		require.NoError(t, err)
		release(t, warm)

		gate := &gateHook{held: make(chan struct{}), open: make(chan struct{})}
		s.rdb.AddHook(gate)
		auto := s.client.b.(*redisBackend).auto
		type result struct {
			l   *Lease
			err error
		}
		first := make(chan result, 1)
		go func() {
			l, err := s.client.TryAcquire(ctx, "first", 5*time.Second)
			first <- result{l, err}
		}()
		<-gate.held
		const queued = 10
		results := make(chan result, queued)
		for i := range queued {
			go func() {
				l, err := s.client.TryAcquire(ctx, fmt.Sprintf("queued-%d", i), 5*time.Second)
				results <- result{l, err}
			}()
		}
		testwait.Until(t, 10*time.Second, "the calls queued behind the first", func() bool {
			return auto.Queued() == queued
		})
		close(gate.open)

		r := <-first
		require.NoError(t, r.err)
		held := []*Lease{r.l}
		tokens := map[uint64]bool{}
		for range queued {
			r := <-results
			require.NoError(t, r.err)
			require.NoError(t, r.l.Err())
			tokens[uint64(r.l.Token())] = true
			held = append(held, r.l)
		}
		require.Len(t, tokens, queued)
		require.Equal(t, int64(1), gate.pipelines.Load(), "the ten queued calls went out in one pipeline")
		require.Equal(t, int64(queued), gate.piped.Load())
		require.Equal(t, int64(1), gate.plain.Load(), "the first went out alone")
		for _, l := range held {
			release(t, l)
		}
	})
}

// Many goroutines acquiring and releasing at once: every call gets its
// own answer, no call waits for ever, and the batches leave nothing behind.
func TestAutoPipeUnderLoad(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		const workers, rounds = 32, 20
		var wg sync.WaitGroup
		errs := make(chan error, workers*rounds)
		for w := range workers {
			wg.Go(func() {
				for i := range rounds {
					l, err := s.client.TryAcquire(ctx, fmt.Sprintf("w%d", w), 5*time.Second)
					if err != nil {
						errs <- fmt.Errorf("worker %d round %d: %w", w, i, err)
						return
					}
					if err := l.Release(ctx); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.True(t, s.client.b.(*redisBackend).auto.Idle(), "no batch on the wire, none waiting")
		keys, err := s.rdb.Keys(ctx, s.prefix+"*").Result()
		require.NoError(t, err)
		for _, k := range keys {
			require.Contains(t, k, ":fence", "only fence counters stay: %s", k)
		}
	})
}

// A call whose ctx already ended sends nothing.
func TestAutoPipeCanceledCallSendsNothing(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := s.client.TryAcquire(ctx, "never", time.Second)
		require.ErrorIs(t, err, context.Canceled)
		key, _ := s.client.Keys("never")
		require.ErrorIs(t, s.rdb.Get(context.Background(), key).Err(), redis.Nil)
	})
}
