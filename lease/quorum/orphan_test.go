package quorum_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/faultproxy"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/quorum"
)

// Issue 11, part 7: under load a master's answer to a try can come after
// the client's ReadTimeout. The script ran and took the key all the same;
// a try that failed left it there, for the TTL, against every later try
// (each has a new owner): "held by another owner for 50.2 s more" when it
// was the acquirer's own earlier try. Two ways the answer went missing:
//
//   - TimedOut: the answer never arrives in time (no retry): the reply is
//     an error, and a failed try freed only the masters that granted;
//   - RetriedAfterTimeout: go-redis sends the command again after the
//     timeout, and the retry finds the key held by the same owner, which
//     the script answered as a refusal by "another" holder.
//
// Either way the try must free the key. Master 2 sits behind a proxy that
// holds one reply for 1 s (the clients' ReadTimeout is 150 ms); masters 0
// and 1 are held by another owner, so the try fails.
func TestFailedTryLeavesNoKeyWhereItsAnswerWasLost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		retries int // go-redis MaxRetries of master 2's client
	}{
		{"TimedOut", -1},
		{"RetriedAfterTimeout", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			m := startMasters(t, 3)
			p, err := faultproxy.New(m.srvs[2].Addr())
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Close() })
			slow := redis.NewClient(&redis.Options{
				Addr: p.Addr(), PoolSize: 1, MaxRetries: tc.retries,
				DialTimeout: nodeTimeout, ReadTimeout: nodeTimeout, WriteTimeout: nodeTimeout,
			})
			t.Cleanup(func() { _ = slow.Close() })
			b, err := quorum.New([]redis.UniversalClient{m.rdbs[0], m.rdbs[1], slow}, quorum.Options{Prefix: m.prefix})
			require.NoError(t, err)
			c, err := lease.NewWithBackend(b, lease.Options{})
			require.NoError(t, err)

			const name = "orphan"
			leaseKey, _ := b.Keys(name)
			for _, rdb := range m.rdbs[:2] {
				require.NoError(t, rdb.Set(ctx, leaseKey, "another-owner", time.Minute).Err())
			}
			direct := m.rdbs[2]
			// A first try loads the scripts on master 2 (else the delayed
			// EVALSHA would be a NOSCRIPT, which takes no key): granted
			// there, refused by the majority, undone.
			_, err = c.TryAcquire(ctx, name, time.Minute)
			require.ErrorIs(t, err, lease.ErrNotAcquired)
			requireNoKey(t, direct, leaseKey)

			before := p.Received(faultproxy.Downstream)
			p.SetDelay(faultproxy.Downstream, time.Second)
			got := make(chan error, 1)
			go func() {
				_, err := c.TryAcquire(ctx, name, time.Minute)
				got <- err
			}()
			// Only that reply is late: what follows (a retry, the
			// compare-and-delete, on a new connection) goes through.
			testwait.Until(t, 10*time.Second, "master 2's reply held", func() bool {
				return p.Received(faultproxy.Downstream) > before
			})
			p.SetDelay(faultproxy.Downstream, 0)
			require.ErrorIs(t, <-got, lease.ErrNotAcquired, "the other owner holds a majority")
			// The late answer is handled after the try returned (redsync
			// decided on the majority): wait for it, well within the TTL.
			testwait.Until(t, 10*time.Second, "master 2 freed of the failed try's key", func() bool {
				n, err := direct.Exists(ctx, leaseKey).Result()
				return err == nil && n == 0
			})
		})
	}
}

func requireNoKey(t *testing.T, rdb redis.UniversalClient, key string) {
	t.Helper()
	testwait.Until(t, 10*time.Second, "no key "+key, func() bool {
		n, err := rdb.Exists(context.Background(), key).Result()
		return err == nil && n == 0
	})
}

// Issue 11, part 3, on the quorum backend through lease.Client: every
// master's request takes 2.1 s to arrive (a proxy per master), the TTL is
// 2 s. The acquisition reaches a majority too late: it is refused with
// lease.ErrSlowAcquire, hands out no lease, and frees every master, whose
// keys would otherwise live until 4.1 s after the start.
func TestSlowAcquireOnDelayedMastersIsRefusedAndLeavesNoKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := startMasters(t, 3)
	proxies := make([]*faultproxy.Proxy, len(m.srvs))
	rdbs := make([]redis.UniversalClient, len(m.srvs))
	for i, srv := range m.srvs {
		p, err := faultproxy.New(srv.Addr())
		require.NoError(t, err)
		t.Cleanup(func() { _ = p.Close() })
		proxies[i] = p
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
		t.Cleanup(func() { _ = rdb.Close() })
		rdbs[i] = rdb
	}
	b, err := quorum.New(rdbs, quorum.Options{Prefix: m.prefix})
	require.NoError(t, err)
	c, err := lease.NewWithBackend(b, lease.Options{})
	require.NoError(t, err)
	const name, ttl, slowBy = "slow", 2 * time.Second, 2100 * time.Millisecond
	warm, err := c.TryAcquire(ctx, name, ttl) // scripts loaded on every master
	require.NoError(t, err)
	require.NoError(t, warm.Release(ctx))

	before := make([]int64, len(proxies))
	for i, p := range proxies {
		before[i] = p.Received(faultproxy.Upstream)
		p.SetDelay(faultproxy.Upstream, slowBy)
	}
	type result struct {
		l   *lease.Lease
		err error
	}
	got := make(chan result, 1)
	start := time.Now()
	go func() {
		l, err := c.TryAcquire(ctx, name, ttl)
		got <- result{l, err}
	}()
	// Only the acquire is delayed: the compare-and-deletes go through.
	for i, p := range proxies {
		testwait.Until(t, 10*time.Second, "the acquire reached the proxy", func() bool {
			return p.Received(faultproxy.Upstream) > before[i]
		})
		p.SetDelay(faultproxy.Upstream, 0)
	}
	r := <-got
	require.Nil(t, r.l, "no lease, no token")
	require.ErrorIs(t, r.err, lease.ErrSlowAcquire)
	var slow *leasedriver.SlowAcquireError
	require.ErrorAs(t, r.err, &slow)
	require.GreaterOrEqual(t, slow.Took, slowBy)
	t.Logf("%v", r.err)
	// The try returned once a majority answered; a master that answered
	// after that frees its key itself, a moment later. A key set no
	// earlier than start + slowBy expires no earlier than a TTL after
	// that: a key gone before then was deleted.
	leaseKey, _ := b.Keys(name)
	expiry := start.Add(slowBy + ttl)
	for i, rdb := range m.rdbs {
		testwait.Until(t, time.Until(expiry), fmt.Sprintf("master %d freed before its key's TTL", i), func() bool {
			n, err := rdb.Exists(ctx, leaseKey).Result()
			return err == nil && n == 0
		})
	}
}
