package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// These benchmarks run one contender at a time, for profiling:
//
//	go test -run '^$' -bench 'AcquireRelease/holdfast' -benchmem -cpuprofile cpu.out -memprofile mem.out
//
// cmd/leasebench is the comparison; these are not interleaved. They skip
// when Redis (REDIS_URL, default redis://127.0.0.1:6379/0) is unreachable.

func setup(b *testing.B) []Contender {
	b.Helper()
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		b.Fatalf("REDIS_URL: %v", err)
	}
	rdb := redis.NewClient(opts)
	b.Cleanup(func() { _ = rdb.Close() })
	ctx := context.Background()
	if err := rdb.Ping(ctx).Err(); err != nil {
		b.Skipf("redis %s unreachable: %v", url, err)
	}
	var id [4]byte
	_, _ = rand.Read(id[:])
	prefix := "holdfast-bench:" + hex.EncodeToString(id[:]) + ":"
	b.Cleanup(func() {
		if _, err := DeleteKeys(ctx, rdb, prefix); err != nil {
			b.Errorf("cleanup: %v", err)
		}
	})
	cs, err := New(rdb, prefix, 10*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	return cs
}

// BenchmarkAcquireRelease: one goroutine takes a free lock and frees it.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, c := range setup(b) {
		b.Run(c.Name(), func(b *testing.B) {
			ctx := context.Background()
			w := c.Worker("acquire-release")
			b.ReportAllocs()
			for b.Loop() {
				ok, err := w.Acquire(ctx)
				if err != nil || !ok {
					b.Fatalf("acquire: %v %v", ok, err)
				}
				if err := w.Release(ctx); err != nil {
					b.Fatalf("release: %v", err)
				}
			}
		})
	}
}

// BenchmarkFailedTry: one try on a lock that another worker holds.
func BenchmarkFailedTry(b *testing.B) {
	for _, c := range setup(b) {
		b.Run(c.Name(), func(b *testing.B) {
			ctx := context.Background()
			holder := c.Worker("failed-try")
			if ok, err := holder.Acquire(ctx); err != nil || !ok {
				b.Fatalf("holder: %v %v", ok, err)
			}
			b.Cleanup(func() { _ = holder.Release(ctx) })
			w := c.Worker("failed-try")
			b.ReportAllocs()
			for b.Loop() {
				if ok, err := w.Acquire(ctx); err != nil || ok {
					b.Fatalf("try: %v %v", ok, err)
				}
			}
		})
	}
}

// BenchmarkRenew: one renew call on a held lock.
func BenchmarkRenew(b *testing.B) {
	for _, c := range setup(b) {
		b.Run(c.Name(), func(b *testing.B) {
			ctx := context.Background()
			w := c.Worker("renew")
			if ok, err := w.Acquire(ctx); err != nil || !ok {
				b.Fatalf("acquire: %v %v", ok, err)
			}
			b.Cleanup(func() { _ = w.Release(ctx) })
			b.ReportAllocs()
			for b.Loop() {
				if err := w.Renew(ctx); err != nil {
					b.Fatalf("renew: %v", err)
				}
			}
		})
	}
}
