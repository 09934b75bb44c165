package faultproxy_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdfast-go/holdfast/internal/faultproxy"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// through returns a client of the real Redis that talks through a new proxy.
func through(t *testing.T) (*faultproxy.Proxy, *redis.Client) {
	t.Helper()
	redistest.Real(t) // skips or fails the test when the real Redis does not answer
	opts, err := redis.ParseURL(redistest.URL())
	require.NoError(t, err)
	p, err := faultproxy.New(opts.Addr)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, p.Close()) })
	opts.Addr = p.Addr()
	opts.MaxRetries = -1 // a reset must reach the caller, not be retried away
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	return p, rdb
}

func TestRefusesTargetsOffLoopback(t *testing.T) {
	t.Parallel()
	for _, target := range []string{"10.0.0.1:6379", "192.168.1.2:80", "example.com:80", "8.8.8.8:53"} {
		_, err := faultproxy.New(target)
		require.ErrorIs(t, err, faultproxy.ErrNotLoopback, target)
	}
	_, err := faultproxy.New("no-port")
	require.Error(t, err)
}

func TestForwardsUntouchedByDefault(t *testing.T) {
	t.Parallel()
	p, rdb := through(t)
	ctx := context.Background()
	require.NoError(t, rdb.Set(ctx, t.Name(), "v", time.Minute).Err())
	got, err := rdb.Get(ctx, t.Name()).Result()
	require.NoError(t, err)
	require.Equal(t, "v", got)
	require.Equal(t, 1, p.Conns())
}

func TestDownstreamDelayHoldsTheReply(t *testing.T) {
	t.Parallel()
	p, rdb := through(t)
	ctx := context.Background()
	require.NoError(t, rdb.Ping(ctx).Err()) // connection open before the fault
	const delay = 150 * time.Millisecond
	p.SetDelay(faultproxy.Downstream, delay)
	start := time.Now()
	require.NoError(t, rdb.Ping(ctx).Err())
	require.GreaterOrEqual(t, time.Since(start), delay, "the reply came before the injected delay")
	p.SetDelay(faultproxy.Downstream, 0)
}

func TestStallHoldsUntilResume(t *testing.T) {
	t.Parallel()
	p, rdb := through(t)
	ctx := context.Background()
	require.NoError(t, rdb.Ping(ctx).Err())
	p.Stall()
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	err := rdb.Ping(short).Err()
	cancel()
	require.Error(t, err, "a stalled server answered")

	p.Resume()
	got := make(chan error, 1)
	go func() { got <- rdb.Ping(ctx).Err() }()
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("no answer after Resume")
	}
}

func TestResetBreaksOpenConnections(t *testing.T) {
	t.Parallel()
	p, rdb := through(t)
	ctx := context.Background()
	require.NoError(t, rdb.Ping(ctx).Err())
	p.Stall() // the next command is in flight when the reset comes
	got := make(chan error, 1)
	go func() { got <- rdb.Ping(ctx).Err() }()
	n := 0
	testwait.Until(t, 10*time.Second, "the reset finds the stalled connection", func() bool {
		n = p.Reset()
		return n != 0
	})
	require.Equal(t, 1, n)
	select {
	case err := <-got:
		require.Error(t, err)
		require.False(t, errors.Is(err, context.DeadlineExceeded))
	case <-time.After(10 * time.Second):
		t.Fatal("the reset did not reach the client")
	}
	p.Resume()
	require.NoError(t, rdb.Ping(ctx).Err(), "a new connection after the reset works")
}

func TestReceivedCountsBytesReadPerDirection(t *testing.T) {
	t.Parallel()
	p, rdb := through(t)
	ctx := context.Background()
	require.NoError(t, rdb.Ping(ctx).Err())
	up, down := p.Received(faultproxy.Upstream), p.Received(faultproxy.Downstream)
	require.NoError(t, rdb.Ping(ctx).Err())
	// PING is "*1\r\n$4\r\nping\r\n" (14 bytes), PONG "+PONG\r\n" (7).
	require.Equal(t, up+14, p.Received(faultproxy.Upstream))
	require.Equal(t, down+7, p.Received(faultproxy.Downstream))

	// A delayed request is counted when it reaches the proxy, before it
	// goes on to the server.
	p.SetDelay(faultproxy.Upstream, time.Hour)
	got := make(chan error, 1)
	go func() { got <- rdb.Ping(ctx).Err() }()
	testwait.Until(t, 10*time.Second, "the held request counted", func() bool {
		return p.Received(faultproxy.Upstream) == up+28
	})
	require.Equal(t, down+7, p.Received(faultproxy.Downstream), "no reply yet")
	require.NoError(t, p.Close()) // releases the held chunk's pump
	require.Error(t, <-got)
}
