package bench

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The latency proxy adds its delay to every round trip (at least twice
// the one-way delay), delivers bytes in order and unchanged (a pipeline of
// 50 commands answers in order), and refuses a target off loopback.
func TestLatencyProxyAddsItsDelay(t *testing.T) {
	if os.Getenv("HOLDFAST_SKIP_INTEGRATION") == "1" {
		t.Skip("HOLDFAST_SKIP_INTEGRATION=1")
	}
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewLatencyProxy("192.0.2.1:6379", time.Millisecond); err == nil {
		t.Fatal("a target off loopback was accepted")
	}
	const oneWay = 2 * time.Millisecond
	p, err := NewLatencyProxy(opts.Addr, oneWay)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	po := *opts
	po.Addr = p.Addr()
	rdb := redis.NewClient(&po)
	defer rdb.Close()
	ctx := context.Background()
	for range 5 {
		start := time.Now()
		if err := rdb.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if rtt := time.Since(start); rtt < 2*oneWay {
			t.Fatalf("round trip %v, want at least %v", rtt, 2*oneWay)
		}
	}
	pipe := rdb.Pipeline()
	cmds := make([]*redis.StringCmd, 50)
	for i := range cmds {
		cmds[i] = pipe.Echo(ctx, strconv.Itoa(i))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i, c := range cmds {
		if c.Val() != strconv.Itoa(i) {
			t.Fatalf("echo %d answered %q", i, c.Val())
		}
	}
}
