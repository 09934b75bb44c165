package chaos

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

// failoverCounts are the figures of one ReplicaAck setting.
type failoverCounts struct {
	trials, dups, twoHolders, stale, refused int
}

func (c failoverCounts) String() string {
	return fmt.Sprintf("tokens_not_increasing=%d two_holders=%d/%d stale_accepted=%d refused=%d", c.dups, c.twoHolders, c.trials, c.stale, c.refused)
}

// TestSentinelFailoverWithReplicationLag: per trial a fresh Sentinel
// setup; the replica is SIGSTOPed (replication lags: it receives nothing),
// client A acquires on the primary, the primary is SIGKILLed, the replica
// resumed and promoted without A's key, and a second client B acquires.
// With ReplicaAck off, A still believes it holds the lease when B gets it:
// two holders, which is the control (expected in every such trial); their
// tokens must differ (the TIME floor) and A's late write must be refused by
// pgfence. With ReplicaAck on (1 replica, 200 ms) for A, A's acquire is
// refused as not replicated, so two holders never exist.
func TestSentinelFailoverWithReplicationLag(t *testing.T) {
	t.Parallel()
	const name = "sentinel-failover"
	n := trials(50)
	r := newReport(name, n, n)
	s, pool := newSink(t, "chaos_sentinel_")
	bar := newProgress(name, 2*n)

	var off, on failoverCounts
	for i := range 2 * n {
		ackOn := i%2 == 0
		t.Run(fmt.Sprintf("trial-%d-ack-%t", i, ackOn), func(t *testing.T) {
			c := &on
			if !ackOn {
				c = &off
			}
			c.trials++
			two, dup, stale, refused := failoverTrial(t, s, pool, i, ackOn)
			if two {
				c.twoHolders++
			}
			if dup {
				c.dups++
			}
			if refused {
				c.refused++
			}
			c.stale += stale
		})
		bar.step()
	}
	r.fired = off.twoHolders
	r.violations = off.dups + off.stale + on.dups + on.twoHolders + on.stale
	r.add("ack_off", "("+off.String()+")")
	r.add("ack_on", "("+on.String()+")")
	r.finish(t)
}

func failoverTrial(t *testing.T, s *sink, pool beginnerDB, i int, ackOn bool) (twoHolders, dupToken bool, stale int, refused bool) {
	ctx := trialCtx(t, 2*time.Minute)
	sn := redisproc.StartSentinel(t)
	opts := func(o *redis.FailoverOptions) {
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = 500*time.Millisecond, 500*time.Millisecond, 500*time.Millisecond
	}
	ack := redislease.ReplicaAck{}
	if ackOn {
		ack = redislease.ReplicaAck{Replicas: 1, Timeout: 200 * time.Millisecond}
	}
	ca, err := lease.New(sn.Client(t, opts), lease.Options{Prefix: "chaos:", ReplicaAck: ack})
	require.NoError(t, err)
	// B acquires without ReplicaAck: after the failover the new primary has
	// no replica left to acknowledge anything.
	cb, err := lease.New(sn.Client(t, opts), lease.Options{Prefix: "chaos:"})
	require.NoError(t, err)
	lname, res := fmt.Sprintf("failover-%d", i), fmt.Sprintf("failover-%d", i)
	const ttl = time.Minute // A's trust window spans the failover; it renews after 20 s

	// SIGSTOP alone makes no lag: the primary's stream lands in the
	// stopped replica's socket buffer, which it reads on SIGCONT. A backlog
	// larger than the socket buffers keeps what follows it in the primary's
	// own output buffer, which dies with the primary.
	sn.Replica().Pause(t)
	backlog(t, sn.Primary().Client(t), 24<<20)
	la, err := tryAcquire(ctx, ca, lname, ttl)
	if ackOn {
		require.ErrorIs(t, err, redislease.ErrNotReplicated, "the stalled replica cannot acknowledge")
		refused = true
	} else {
		require.NoError(t, err)
		require.NoError(t, s.write(ctx, pool, res, holderOf(la), "a-before", true))
	}
	sn.Primary().Kill(t)
	sn.Replica().Resume(t)
	sn.Promote(t)

	var lb *lease.Lease
	err = testwait.Poll(30*time.Second, 50*time.Millisecond, func() error {
		var err error
		lb, err = tryAcquire(ctx, cb, lname, ttl)
		return err
	})
	require.NoError(t, err, "B never acquired after the failover")
	if la != nil {
		twoHolders = la.Err() == nil
		// B's token must be above A's, not only another: a token at or
		// below A's lets A's late write in and refuses B's (with the
		// promoted replica's clock behind the primary's by more than the
		// failover took; this test's nodes share one clock).
		dupToken = lb.Token() <= la.Token()
		t.Logf("A token %d (holds: %t), B token %d", la.Token(), twoHolders, lb.Token())
	}
	require.NoError(t, s.write(ctx, pool, res, holderOf(lb), "b", true))
	if la != nil {
		err := s.write(ctx, pool, res, holderOf(la), "a-late", true)
		if err != nil {
			require.True(t, isStale(err), "A's late write: %v", err)
		}
		_ = la.Release(ctx)
	}
	require.NoError(t, lb.Release(ctx))
	es, err := s.effects(ctx, pool, res)
	require.NoError(t, err)
	return twoHolders, dupToken, staleAccepted(es), refused
}

// backlog writes size bytes of filler to rdb, in 512 KiB values.
func backlog(t *testing.T, rdb *redis.Client, size int) {
	t.Helper()
	ctx := context.Background()
	chunk := strings.Repeat("x", 512<<10)
	pipe := rdb.Pipeline()
	for i := range size / len(chunk) {
		pipe.Set(ctx, fmt.Sprintf("chaos:filler:%d", i), chunk, 0)
	}
	_, err := pipe.Exec(ctx)
	require.NoError(t, err)
}
