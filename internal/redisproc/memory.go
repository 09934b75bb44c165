package redisproc

import (
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// FillPrefix starts the keys Fill writes.
const FillPrefix = "redisproc-fill:"

// Fill writes keys of 64 KiB without a TTL (FillPrefix + n) to a server
// started with --maxmemory, in batches of 16, until done returns true after
// a batch or the server refuses a write with OOM. It reports whether a
// write was refused. Near maxmemory a server refuses one write and takes
// the next (connection buffers come and go): to keep it full, use
// Squeeze. It fails the test after 100,000 keys or on another error.
// Unfill deletes the keys.
func (s *Server) Fill(t testing.TB, done func() bool) (oom bool) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer rdb.Close()
	value := strings.Repeat("x", 64<<10)
	for n := 0; n < 100_000; n += 16 {
		ctx, cancel := adminCtx()
		pipe := rdb.Pipeline()
		for i := range 16 {
			pipe.Set(ctx, FillPrefix+strconv.Itoa(n+i), value, 0)
		}
		_, err := pipe.Exec(ctx)
		cancel()
		if err != nil && !strings.HasPrefix(err.Error(), "OOM ") {
			t.Fatalf("redisproc: fill %s: %v", s.Addr(), err)
		}
		if err != nil || (done != nil && done()) {
			return err != nil
		}
	}
	t.Fatalf("redisproc: fill %s: 100,000 keys and no OOM: is maxmemory set?", s.Addr())
	return false
}

// Squeeze makes the server's memory full for good: it writes 2 MiB of keys
// without a TTL (FillPrefix + n), then sets maxmemory (CONFIG SET, on this
// test-owned server) to half the memory used, so every write that needs
// memory is refused with OOM under noeviction (or evicts, under another
// policy) until Unfill. The server's policy is left as started.
func (s *Server) Squeeze(t testing.TB) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer rdb.Close()
	ctx, cancel := adminCtx()
	defer cancel()
	value := strings.Repeat("x", 64<<10)
	pipe := rdb.Pipeline()
	for i := range 32 {
		pipe.Set(ctx, FillPrefix+"squeeze:"+strconv.Itoa(i), value, 0)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("redisproc: squeeze %s: %v", s.Addr(), err)
	}
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		t.Fatalf("redisproc: squeeze %s: %v", s.Addr(), err)
	}
	used, err := strconv.ParseInt(infoField(info, "used_memory"), 10, 64)
	if err != nil {
		t.Fatalf("redisproc: squeeze %s: used_memory: %v", s.Addr(), err)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory", strconv.FormatInt(used/2, 10)).Err(); err != nil {
		t.Fatalf("redisproc: squeeze %s: %v", s.Addr(), err)
	}
}

// Unfill deletes the keys Fill and Squeeze wrote. It leaves maxmemory as
// it is: after Squeeze, the server has room again (half its memory was
// those keys).
func (s *Server) Unfill(t testing.TB) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer rdb.Close()
	ctx, cancel := adminCtx()
	defer cancel()
	iter := rdb.Scan(ctx, 0, FillPrefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("redisproc: unfill %s: %v", s.Addr(), err)
	}
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		if err := rdb.Del(ctx, keys[:n]...).Err(); err != nil {
			t.Fatalf("redisproc: unfill %s: %v", s.Addr(), err)
		}
		keys = keys[n:]
	}
}

// EvictedKeys returns the server's INFO stats evicted_keys.
func (s *Server) EvictedKeys(t testing.TB) int64 {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	defer rdb.Close()
	ctx, cancel := adminCtx()
	defer cancel()
	info, err := rdb.Info(ctx, "stats").Result()
	if err != nil {
		t.Fatalf("redisproc: INFO stats of %s: %v", s.Addr(), err)
	}
	n, err := strconv.ParseInt(infoField(info, "evicted_keys"), 10, 64)
	if err != nil {
		t.Fatalf("redisproc: evicted_keys of %s: %v", s.Addr(), err)
	}
	return n
}
