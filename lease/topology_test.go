package lease_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

// topology is what the shared lease checks need from a deployment: a
// client, the lease names to use, and a way to empty every node's script
// cache.
type topology struct {
	rdb          redis.UniversalClient
	names        []string
	flushScripts func(t *testing.T)
	// fresh returns a new client of the deployment, for a check that adds
	// a hook to it.
	fresh func(t *testing.T) redis.UniversalClient
}

func TestLeasesOnCluster(t *testing.T) {
	t.Parallel()
	cl := redisproc.StartCluster(t, 3)
	rdb := cl.Client(t)
	ctx := context.Background()
	c, err := lease.New(rdb, lease.Options{Prefix: procPrefix})
	require.NoError(t, err)

	// Two names per node, so every check crosses all three masters.
	perNode := map[*redisproc.Server][]string{}
	var names []string
	for i := 0; len(names) < 2*len(cl.Nodes); i++ {
		require.Less(t, i, 1000, "names spread over the nodes")
		name := fmt.Sprint("job-", i)
		leaseKey, fenceKey := lease.KeysOf(c, name)
		slot, err := rdb.ClusterKeySlot(ctx, leaseKey).Result()
		require.NoError(t, err)
		fenceSlot, err := rdb.ClusterKeySlot(ctx, fenceKey).Result()
		require.NoError(t, err)
		require.Equal(t, slot, fenceSlot, "both keys of %q share the hash tag's slot", name)
		node := cl.NodeForSlot(int(slot))
		if len(perNode[node]) < 2 {
			perNode[node] = append(perNode[node], name)
			names = append(names, name)
		}
	}

	exerciseTopology(t, topology{
		rdb:   rdb,
		names: names,
		fresh: func(t *testing.T) redis.UniversalClient { return cl.Client(t) },
		flushScripts: func(t *testing.T) {
			for _, n := range cl.Nodes {
				require.NoError(t, n.Client(t).ScriptFlush(context.Background()).Err())
			}
		},
	})
}

func TestLeasesOnSentinel(t *testing.T) {
	t.Parallel()
	s := redisproc.StartSentinel(t)
	rdb := s.Client(t)
	exerciseTopology(t, topology{
		rdb:   rdb,
		names: []string{"job-a", "job-b", "job-c"},
		fresh: func(t *testing.T) redis.UniversalClient { return s.Client(t) },
		flushScripts: func(t *testing.T) {
			for _, n := range []*redisproc.Server{s.Primary(), s.Replica()} {
				require.NoError(t, n.Client(t).ScriptFlush(context.Background()).Err())
			}
		},
	})

	// Observed on Redis 7.0 (loopback, a few writes per second): the old
	// lease's key and counter reach the replica long before the
	// failover, so the old holder keeps renewing through it (renewals
	// during the switch fail or are retried on READONLY, well within the
	// TTL) and the new primary answers NOSCRIPT once, as scripts are not
	// replicated. The new token exceeds the old one through the
	// replicated counter and, were it lost, through the TIME floor (same
	// host clock).
	t.Run("FailoverKeepsTokensIncreasing", func(t *testing.T) {
		ctx := context.Background()
		// ReplicaAck: the acquire returns once the replica has the key.
		c, err := lease.New(rdb, lease.Options{Prefix: procPrefix, ReplicaAck: redislease.ReplicaAck{Replicas: 1, Timeout: time.Second}})
		require.NoError(t, err)
		old, err := c.TryAcquire(ctx, "failover", 5*time.Second)
		require.NoError(t, err)
		oldPrimary := s.Primary()

		start := time.Now()
		s.Failover(t)
		t.Logf("failover took %v", time.Since(start))
		require.NotSame(t, oldPrimary, s.Primary())

		_, fenceKey := lease.KeysOf(c, "failover")
		counter, err := s.Primary().Client(t).Get(ctx, fenceKey).Uint64()
		if err == nil {
			t.Logf("counter on the new primary: %d (old token %d)", counter, old.Token())
		} else {
			t.Logf("counter on the new primary: %v", err)
		}

		renewErr := old.Renew(ctx)
		t.Logf("old lease after failover: Err()=%v, Renew()=%v", old.Err(), renewErr)
		requireLeaseOutcome(t, renewErr)
		requireLeaseOutcome(t, old.Err())
		if renewErr == nil {
			require.NoError(t, old.Err(), "a successful renew means the lease is held")
		}
		releaseErr := old.Release(ctx)
		t.Logf("old lease release: %v", releaseErr)
		if releaseErr != nil {
			require.ErrorIs(t, releaseErr, lease.ErrNotHeld)
		}

		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		fresh, err := c.Acquire(actx, "failover", 5*time.Second)
		require.NoError(t, err)
		require.Greater(t, fresh.Token(), old.Token(), "tokens increase across the failover")
		require.NoError(t, fresh.Release(ctx))
	})
}

// requireLeaseOutcome accepts what a lease call may report after a
// failover: nothing, a typed loss, or a Redis/network error, never an
// untyped surprise.
func requireLeaseOutcome(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var (
		lost  *lease.LostError
		rerr  redis.Error
		nerr  net.Error
		typed = errors.As(err, &lost) || errors.Is(err, lease.ErrNotHeld)
	)
	if typed {
		if lost != nil {
			require.True(t, errors.Is(err, lease.ErrExpired) || errors.Is(err, lease.ErrNotHeld),
				"a loss during failover is expiry or not-held: %v", err)
		}
		return
	}
	require.True(t, errors.As(err, &rerr) || errors.As(err, &nerr),
		"want a typed lease error or a Redis/network error, got %T: %v", err, err)
}

// exerciseTopology runs what the Redis backend must do on every node of a
// deployment, each check on names spread over its masters. The lease
// contract itself (racing acquirers, token order, keep-alive, ...) is
// leasedrivertest.Exercise's, which TestConformance runs on a Cluster and on a
// Sentinel deployment.
func exerciseTopology(t *testing.T, top topology) {
	ctx := context.Background()
	newClient := func(t *testing.T) *lease.Client {
		t.Helper()
		c, err := lease.New(top.rdb, lease.Options{Prefix: procPrefix})
		require.NoError(t, err)
		return c
	}

	t.Run("AcquireRenewRelease", func(t *testing.T) {
		c := newClient(t)
		for _, name := range top.names {
			l, err := c.TryAcquire(ctx, name, 10*time.Second)
			require.NoError(t, err, name)
			leaseKey, _ := lease.KeysOf(c, name)
			requireOwner(t, top.rdb, leaseKey, l.Holder().Owner)
			require.NoError(t, top.rdb.PExpire(ctx, leaseKey, time.Second).Err())
			require.NoError(t, l.Renew(ctx), name)
			pttl, err := top.rdb.PTTL(ctx, leaseKey).Result()
			require.NoError(t, err)
			require.Greater(t, pttl, 5*time.Second, "renew restored the TTL of %q", name)
			require.NoError(t, l.Release(ctx), name)
			n, err := top.rdb.Exists(ctx, leaseKey).Result()
			require.NoError(t, err)
			require.Zero(t, n, "released %q", name)
		}
	})

	t.Run("SlowAcquireIsRefusedAndLeavesNoKey", func(t *testing.T) {
		slowAcquireOnTopology(t, top.fresh(t), top.rdb, top.names[0])
	})

	t.Run("ScriptFlushIsRecovered", func(t *testing.T) {
		c := newClient(t)
		// Long enough for the keep-alive's renewals, which reload the
		// scripts on every node, on a loaded machine: with 300 ms, a
		// run beside busy loops lost job-0 (trust window ended).
		const ttl = time.Second
		for _, name := range top.names {
			top.flushScripts(t)
			l, err := c.TryAcquire(ctx, name, 10*time.Second)
			require.NoError(t, err, "acquire after SCRIPT FLUSH")
			top.flushScripts(t)
			require.NoError(t, l.Renew(ctx), "renew after SCRIPT FLUSH")
			top.flushScripts(t)
			require.NoError(t, l.Release(ctx), "release after SCRIPT FLUSH")
		}
		// The keep-alive's batched renewals recover too.
		var held []*lease.Lease
		start := time.Now()
		for _, name := range top.names {
			l, err := c.TryAcquire(ctx, name, ttl)
			require.NoError(t, err)
			held = append(held, l)
		}
		top.flushScripts(t)
		for _, l := range held {
			testwait.Until(t, 10*time.Second, "keep-alive of "+l.Name()+" after SCRIPT FLUSH", func() bool {
				return l.Deadline().After(start.Add(2*ttl)) || l.Err() != nil
			})
			require.NoError(t, l.Err(), l.Name())
			require.NoError(t, l.Release(ctx))
		}
	})
}

func requireOwner(t *testing.T, rdb redis.UniversalClient, leaseKey, owner string) {
	t.Helper()
	got, err := rdb.Get(context.Background(), leaseKey).Result()
	require.NoError(t, err)
	require.Equal(t, owner, got, leaseKey)
}
