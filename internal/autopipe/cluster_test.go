package autopipe

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/testwait"
)

// clusterBatches records the pipelines a Cluster client sends (the
// commands of each, as Pipe handed them over) and holds the first plain
// script call until open is closed.
type clusterBatches struct {
	gate
	mu      sync.Mutex
	batches [][]redis.Cmder
}

func (h *clusterBatches) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.mu.Lock()
		h.batches = append(h.batches, cmds)
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

func (h *clusterBatches) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if _, ok := scriptKey(cmd); ok {
			h.once.Do(func() { close(h.held); <-h.open })
		}
		return next(ctx, cmd)
	}
}

// On a Cluster, script calls queued behind a send go out together, and
// a batch is never sent a second time: its first command meets TRYAGAIN
// (a reply go-redis would retry the whole node batch on), and the second,
// an INCR, runs once.
func TestClusterBatchIsNotSentAgain(t *testing.T) {
	c := redisproc.StartCluster(t, 3)
	h := &clusterBatches{gate: gate{held: make(chan struct{}), open: make(chan struct{})}}
	rdb := c.Client(t)
	rdb.AddHook(h)
	p := NewInFlight(rdb, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	first := redis.NewCmd(ctx, "eval", "return 1", 1, "{t}first")
	tryAgain := redis.NewCmd(ctx, "eval", "return redis.error_reply('TRYAGAIN test')", 1, "{t}again")
	incr := redis.NewCmd(ctx, "eval", "return redis.call('INCR', KEYS[1])", 1, "{t}counter")
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { _ = p.Process(ctx, first) })
	<-h.held
	wg.Go(func() { _ = p.Process(ctx, tryAgain) })
	testwait.Until(t, 10*time.Second, "the TRYAGAIN call queued", func() bool { return p.Queued() == 1 })
	wg.Go(func() { _ = p.Process(ctx, incr) })
	testwait.Until(t, 10*time.Second, "the INCR call queued", func() bool { return p.Queued() == 2 })
	close(h.open)
	wg.Wait()

	require.NoError(t, first.Err())
	require.ErrorContains(t, tryAgain.Err(), "TRYAGAIN")
	require.NoError(t, incr.Err())
	require.Equal(t, int64(1), incr.Val(), "the INCR's answer")
	n, err := rdb.Get(ctx, "{t}counter").Int64()
	require.NoError(t, err)
	require.Equal(t, int64(1), n, "the batch ran once: go-redis did not send it again")
	h.mu.Lock()
	defer h.mu.Unlock()
	require.Len(t, h.batches, 1, "the two queued calls went out in one pipeline")
	require.Len(t, h.batches[0], 2)
}

// On a Cluster, calls are joined per master: every batch holds the calls
// of one master only, and every call is answered.
func TestClusterJoinsCallsPerMaster(t *testing.T) {
	c := redisproc.StartCluster(t, 3)
	h := &clusterBatches{gate: gate{held: make(chan struct{}), open: make(chan struct{})}}
	close(h.open)
	rdb := c.Client(t)
	rdb.AddHook(h)
	p := NewInFlight(rdb, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	const goroutines, calls = 32, 50
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				key := fmt.Sprintf("k%d-%d", g, i)
				cmd := redis.NewCmd(ctx, "eval", "return KEYS[1]", 1, key)
				if err := p.Process(ctx, cmd); err != nil {
					errs <- err
					return
				}
				if cmd.Val() != key {
					errs <- fmt.Errorf("call for %s answered %v", key, cmd.Val())
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err, "every call gets its own answer")
	}
	require.True(t, p.Idle())

	h.mu.Lock()
	defer h.mu.Unlock()
	joined := 0
	for _, b := range h.batches {
		joined += len(b)
		var master *redis.Client
		for _, cmd := range b {
			key, ok := scriptKey(cmd)
			require.True(t, ok)
			m, err := rdb.MasterForKey(ctx, key)
			require.NoError(t, err)
			if master == nil {
				master = m
			}
			require.Same(t, master, m, "a batch holds the calls of one master")
		}
	}
	require.Greater(t, joined, 0, "some calls were joined")
}
