// Package redistest gives tests a Redis to talk to: a real server (REDIS_URL,
// default redis://127.0.0.1:6379/0) or an in-process miniredis, each with a
// key prefix of its own so tests never collide on a shared server.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/holdfast-go/holdfast/internal/miniconf"
	"github.com/redis/go-redis/v9"
)

// DefaultURL is used when REDIS_URL is not set.
const DefaultURL = "redis://127.0.0.1:6379/0"

// Backend is one kind of Redis a test can run against.
type Backend struct {
	Name string
	New  func(t testing.TB) redis.UniversalClient
}

// Backends returns the real Redis and miniredis, in that order.
func Backends() []Backend {
	return []Backend{{Name: "redis", New: Real}, {Name: "miniredis", New: Mini}}
}

// URL returns REDIS_URL or DefaultURL.
func URL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Real returns a client of the real Redis at URL(). It fails the test when
// the server does not answer, unless HOLDFAST_SKIP_INTEGRATION=1, which
// skips it. The client is closed when the test ends.
func Real(t testing.TB) redis.UniversalClient {
	t.Helper()
	if os.Getenv("HOLDFAST_SKIP_INTEGRATION") == "1" {
		t.Skip("HOLDFAST_SKIP_INTEGRATION=1")
	}
	opts, err := redis.ParseURL(URL())
	if err != nil {
		t.Fatalf("redistest: REDIS_URL: %v", err)
	}
	rdb := redis.NewClient(opts)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		_ = rdb.Close()
		t.Fatalf("redistest: no Redis at %s (run scripts/services.sh, or set HOLDFAST_SKIP_INTEGRATION=1): %v", URL(), err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// Mini returns a client of a fresh miniredis, closed when the test ends.
// The miniredis answers CONFIG GET maxmemory* as a default Redis does
// (internal/miniconf), so holdfast's eviction-policy check passes.
func Mini(t testing.TB) redis.UniversalClient {
	t.Helper()
	_, rdb := MiniServer(t)
	return rdb
}

// MiniServer is Mini with the miniredis itself, for tests that move its
// clock (SetTime) or fast-forward its keys.
func MiniServer(t testing.TB) (*miniredis.Miniredis, *redis.Client) {
	t.Helper()
	mr := miniredis.RunT(t)
	miniconf.Register(mr)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	return mr, rdb
}

// Prefix returns a key prefix unique to this call, ending in ':'. When the
// test ends, every key of rdb under the prefix is deleted.
func Prefix(t testing.TB, rdb redis.UniversalClient) string {
	t.Helper()
	var b [6]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	prefix := "holdfast-test:" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
	})
	return prefix
}
