package leasedrivertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasetest"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

// RedisBackend returns the newStore of Exercise for lease's built-in
// Redis backend (lease.New) over the deployment newRedis connects to: a
// single server, Sentinel, Cluster, a proxy or a Redis-compatible server.
//
// newRedis must return a new client on each call, closed when t ends (the
// suite adds a hook to it). Each check works under a key prefix of its own
// and deletes its keys when it ends, so the deployment may be shared with
// other tests. configure, when non-nil, adjusts the Options of every
// Client (Logger, BatchSize, ReplicaAck); the suite sets Prefix, and its Holder,
// RetryMin, RetryMax and Observer win (an Observer set by configure still
// receives every measurement).
func RedisBackend(newRedis func(t *testing.T) redis.UniversalClient, configure func(*lease.Options)) func(t *testing.T) Store {
	return func(t *testing.T) Store {
		t.Helper()
		rdb := newRedis(t)
		require.NotNil(t, rdb, "newRedis returned nil")
		cmds := &commandCounter{}
		rdb.AddHook(cmds)
		var rnd [6]byte
		_, _ = rand.Read(rnd[:])
		prefix := "holdfast-conformance:" + hex.EncodeToString(rnd[:]) + ":"
		t.Cleanup(func() { deleteUnder(rdb, prefix) })
		keys, err := lease.New(rdb, lease.Options{Prefix: prefix})
		require.NoError(t, err)
		rb, err := redislease.NewBackend(rdb, redislease.Options{Prefix: prefix})
		require.NoError(t, err)
		return Store{
			NewClient: func(t *testing.T, opts lease.Options) *lease.Client {
				t.Helper()
				var o lease.Options
				if configure != nil {
					configure(&o)
				}
				o.Prefix = prefix
				if opts.Holder != "" {
					o.Holder = opts.Holder
				}
				if opts.RetryMin != 0 || opts.RetryMax != 0 {
					o.RetryMin, o.RetryMax = opts.RetryMin, opts.RetryMax
				}
				if opts.Observer != nil {
					o.Observer = teeObserver{opts.Observer, o.Observer}
				}
				c, err := lease.New(rdb, o)
				require.NoError(t, err)
				return c
			},
			Expire: func(ctx context.Context, name string) error {
				return leasetest.ForceExpire(ctx, rdb, keys, name)
			},
			Inspect: func(ctx context.Context, name string) (string, time.Duration, error) {
				k, err := rb.Keys(name)
				if err != nil {
					return "", 0, err
				}
				leaseKey := k.Lease
				owner, err := rdb.Get(ctx, leaseKey).Result()
				if errors.Is(err, redis.Nil) {
					return "", 0, nil
				}
				if err != nil {
					return "", 0, err
				}
				ttl, err := rdb.PTTL(ctx, leaseKey).Result()
				return owner, ttl, err
			},
			HolderLabel: func(ctx context.Context, name string) (string, error) {
				info, err := rb.Inspect(ctx, name)
				return info.Holder, err
			},
			Commands: cmds.n.Load,
		}
	}
}

// deleteUnder deletes every key under prefix, on every master of a
// Cluster.
func deleteUnder(rdb redis.UniversalClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	scan := func(ctx context.Context, node redis.UniversalClient) error {
		iter := node.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			node.Del(ctx, iter.Val())
		}
		return iter.Err()
	}
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		_ = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error { return scan(ctx, node) })
		return
	}
	_ = scan(ctx, rdb)
}

// teeObserver passes every measurement to both observers (b may be nil).
type teeObserver struct{ a, b lease.Observer }

func (o teeObserver) ObserveAcquire(name string, err error, took time.Duration) {
	o.a.ObserveAcquire(name, err, took)
	if o.b != nil {
		o.b.ObserveAcquire(name, err, took)
	}
}

func (o teeObserver) ObserveEvictions(n int64) {
	o.a.ObserveEvictions(n)
	if o.b != nil {
		o.b.ObserveEvictions(n)
	}
}

func (o teeObserver) ObserveRenew(name string, err error, took time.Duration) {
	o.a.ObserveRenew(name, err, took)
	if o.b != nil {
		o.b.ObserveRenew(name, err, took)
	}
}

func (o teeObserver) ObserveLoss(name string, reason error) {
	o.a.ObserveLoss(name, reason)
	if o.b != nil {
		o.b.ObserveLoss(name, reason)
	}
}

// commandCounter counts the commands sent through a client, pipelined ones
// one by one. Connection set-up (HELLO, AUTH, ...) is not counted.
type commandCounter struct{ n atomic.Int64 }

var setupCommands = map[string]bool{"hello": true, "auth": true, "select": true, "client": true, "readonly": true, "ping": true}

func (h *commandCounter) count(cmd redis.Cmder) {
	if !setupCommands[strings.ToLower(cmd.Name())] {
		h.n.Add(1)
	}
}

func (h *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.count(cmd)
		return next(ctx, cmd)
	}
}

func (h *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.count(cmd)
		}
		return next(ctx, cmds)
	}
}
