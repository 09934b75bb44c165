package quorum_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver/leasedrivertest"
	"github.com/holdfast-go/holdfast/lease/quorum"
)

// TestConformance runs the lease contract (leasedrivertest.Exercise) on
// lease.NewWithBackend over the quorum Backend, on 5 test-owned
// redis-server processes. Each check gets its own key prefix and its own
// clients of the 5 servers; every Client has its own Backend, as separate
// replicas do.
func TestConformance(t *testing.T) {
	t.Parallel()
	var srvs []*redisproc.Server
	for range 5 {
		srvs = append(srvs, redisproc.Start(t))
	}
	leasedrivertest.Exercise(t, func(t *testing.T) leasedrivertest.Store { return quorumStore(t, srvs) })
}

// quorumStore describes the quorum Backend to the suite:
//
//   - the lease is stored where a majority of the masters hold the same
//     owner; Inspect reports that owner, and how long a majority keeps
//     it;
//   - Expire deletes the lease key on every master, as expiry would;
//   - Commands counts the commands sent to the least-used master: every
//     operation sends at most one command to each master, in parallel
//     (an acquisition two: the lock with the token candidate, then the
//     raise), so on a master that holds the lease the count is the count
//     of round trips. Not every master need hold it: an acquisition
//     returns once a majority granted, and a try sent right after it can
//     reach a straggler first and take that master from the holder (seen
//     on a loaded machine, issue 11 part 7: 20 commands for 10 failed
//     tries on the first master). Each later failed try is then granted
//     there and undone, a second round trip on that master alone, which
//     is the backend working as designed, not a try costing two.
func quorumStore(t *testing.T, srvs []*redisproc.Server) leasedrivertest.Store {
	t.Helper()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	prefix := "holdfast-conformance:" + hex.EncodeToString(rnd[:]) + ":"
	cmds := make([]*commandCounter, len(srvs))
	rdbs := make([]redis.UniversalClient, len(srvs))
	for i, srv := range srvs {
		rdb := srv.Client(t, func(o *redis.Options) {
			o.DialTimeout, o.ReadTimeout, o.WriteTimeout = time.Second, time.Second, time.Second
		})
		cmds[i] = &commandCounter{}
		rdb.AddHook(cmds[i])
		rdbs[i] = rdb
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		for _, rdb := range rdbs {
			iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				rdb.Del(ctx, iter.Val())
			}
		}
	})
	keys, err := quorum.New(rdbs, quorum.Options{Prefix: prefix})
	require.NoError(t, err)
	quorumOf := keys.Quorum()
	return leasedrivertest.Store{
		NewClient: func(t *testing.T, opts lease.Options) *lease.Client {
			t.Helper()
			b, err := quorum.New(rdbs, quorum.Options{Prefix: prefix})
			require.NoError(t, err)
			c, err := lease.NewWithBackend(b, opts)
			require.NoError(t, err)
			return c
		},
		Expire: func(ctx context.Context, name string) error {
			leaseKey, _ := keys.Keys(name)
			var errs []error
			for _, rdb := range rdbs {
				if err := rdb.Del(ctx, leaseKey).Err(); err != nil {
					errs = append(errs, err)
					continue
				}
				errs = append(errs, rdb.Publish(ctx, leaseKey+":released", "1").Err())
			}
			return errors.Join(errs...)
		},
		Inspect: func(ctx context.Context, name string) (string, time.Duration, error) {
			leaseKey, _ := keys.Keys(name)
			pttls := map[string][]time.Duration{}
			for _, rdb := range rdbs {
				owner, err := rdb.Get(ctx, leaseKey).Result()
				if errors.Is(err, redis.Nil) {
					continue
				}
				if err != nil {
					return "", 0, err
				}
				pttl, err := rdb.PTTL(ctx, leaseKey).Result()
				if err != nil {
					return "", 0, err
				}
				pttls[owner] = append(pttls[owner], pttl)
			}
			for owner, ds := range pttls {
				if len(ds) >= quorumOf {
					// A majority holds it until its quorum-th longest
					// key expires.
					slices.Sort(ds)
					return owner, ds[len(ds)-quorumOf], nil
				}
			}
			return "", 0, nil
		},
		Commands: func() int64 { return leastUsed(cmds) },
	}
}

// leastUsed returns the smallest of the counts. Counted before and after a
// run of operations, its difference is the run's count on a master that
// holds the lease, as long as no master sees fewer commands in the run
// than those (each master sees each operation's command at most once, a
// master taken from the holder more).
func leastUsed(cmds []*commandCounter) int64 {
	least := cmds[0].n.Load()
	for _, c := range cmds[1:] {
		least = min(least, c.n.Load())
	}
	return least
}

// commandCounter counts the commands sent through a client (connection
// set-up excepted).
type commandCounter struct{ n atomic.Int64 }

var setupCommands = map[string]bool{"hello": true, "auth": true, "select": true, "client": true, "ping": true}

func (h *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !setupCommands[strings.ToLower(cmd.Name())] {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if !setupCommands[strings.ToLower(cmd.Name())] {
				h.n.Add(1)
			}
		}
		return next(ctx, cmds)
	}
}
