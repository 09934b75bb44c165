package quorum_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"

	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/quorum"
)

// BenchmarkAcquireRelease compares, on the same 5 test-owned masters, one
// goroutine taking a free lock and freeing it:
//
//   - holdfast: lease.Client on the quorum Backend (TryAcquire + Release),
//     with its keep-alive, loss signal and a token raised on a majority;
//   - holdfast-raise: the same without token proposals (TokenLead -1), so
//     that every acquisition takes the raise round trip: what the token's
//     second phase costs when it cannot be left out;
//   - redsync: a bare redsync Mutex (TryLockContext + UnlockContext),
//     reused, no token.
//
// ops/s is reported for each; the ratio is holdfast / redsync.
func BenchmarkAcquireRelease(b *testing.B) {
	m := startMasters(b, 5)
	ctx := context.Background()
	const ttl = 10 * time.Second

	holdfast := func(b *testing.B, opts quorum.Options) {
		opts.Prefix = m.prefix + "holdfast:"
		backend, err := quorum.New(m.rdbs, opts)
		if err != nil {
			b.Fatal(err)
		}
		c, err := lease.NewWithBackend(backend, lease.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			l, err := c.TryAcquire(ctx, "bench", ttl)
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	}
	b.Run("holdfast", func(b *testing.B) { holdfast(b, quorum.Options{}) })
	b.Run("holdfast-raise", func(b *testing.B) { holdfast(b, quorum.Options{TokenLead: -1}) })

	b.Run("redsync", func(b *testing.B) {
		pools := make([]redsyncredis.Pool, len(m.rdbs))
		for i, rdb := range m.rdbs {
			pools[i] = goredis.NewPool(rdb)
		}
		mu := redsync.New(pools...).NewMutex(m.prefix+"redsync:{bench}", redsync.WithExpiry(ttl), redsync.WithTries(1))
		b.ReportAllocs()
		for b.Loop() {
			if err := mu.TryLockContext(ctx); err != nil {
				b.Fatal(err)
			}
			if ok, err := mu.UnlockContext(ctx); !ok {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ops/s")
	})
}
