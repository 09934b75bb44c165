package lease

import (
	"context"
	"errors"
	"fmt"
	"github.com/holdfast-go/holdfast/internal/formatver"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/lease/internal/testhooks"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// How calls are batched is tested in internal/autopipe; these tests check
// the lease client over it.

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
		require.True(t, testhooks.RedisIdle(s.client.b), "no batch on the wire, none waiting")
		keys, err := s.rdb.Keys(ctx, s.prefix+"*").Result()
		require.NoError(t, err)
		for _, k := range keys {
			if k == formatver.Key(s.prefix) {
				continue // the stored format's marker
			}
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
		key, _ := KeysOf(s.client, "never")
		require.ErrorIs(t, s.rdb.Get(context.Background(), key).Err(), redis.Nil)
	})
}

// Callers that leave (ctx canceled) while their calls are queued, on the
// wire or in a batch break none of the others, and no key is left behind:
// a call that left before its command was sent sent nothing, and a grant
// whose answer came back is returned (and released here) or undone.
func TestAutoPipeCallersLeavingMidBatch(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		const workers, rounds = 48, 15
		var wg sync.WaitGroup
		errs := make(chan error, workers*rounds)
		for w := range workers {
			leaves := w%3 == 0
			wg.Go(func() {
				for i := range rounds {
					callCtx, cancel := context.WithCancel(ctx)
					if leaves {
						go cancel() // races the call: queued, sent or answered
					}
					l, err := s.client.TryAcquire(callCtx, fmt.Sprintf("w%d", w), 5*time.Second)
					cancel()
					switch {
					case err == nil:
						if rerr := l.Release(ctx); rerr != nil {
							errs <- fmt.Errorf("worker %d round %d: release: %w", w, i, rerr)
						}
					case !leaves || !errors.Is(err, context.Canceled):
						errs <- fmt.Errorf("worker %d round %d: %w", w, i, err)
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.True(t, testhooks.RedisIdle(s.client.b), "nothing on the wire, nothing waiting")
		keys, err := s.rdb.Keys(ctx, s.prefix+"*").Result()
		require.NoError(t, err)
		for _, k := range keys {
			if k == formatver.Key(s.prefix) {
				continue // the stored format's marker
			}
			require.Contains(t, k, ":fence", "only fence counters stay: %s", k)
		}
	})
}
