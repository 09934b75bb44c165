package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/lease"
)

// TestNetworkPartitionBetweenHolderAndRedis: holder A reaches Redis only
// through a fault proxy, competitor B directly. A acquires, writes once,
// and checks that it still holds the lease before its next write; then
// the network between A and Redis is cut (faultproxy Stall: every byte
// held, on open and new connections, as a partition that drops packets
// does) while A's write is in flight (it lands once B has written). A's
// renewals get no answer, its trust window ends, Redis expires its key,
// B takes the lease over and writes; A's late write reaches the sink after
// B's and must be refused. Counted: accepted writes the fence rule refuses
// (stale_accepted), and A's loss observed more than signalSlack after its
// trust window ended (loss_signalled_late); successor_before_signal
// (informational, as in redis-pause) counts B acquiring before A observed
// its loss.
// Control: the sink without its fence check, which accepts A's late write
// over B's.
func TestNetworkPartitionBetweenHolderAndRedis(t *testing.T) {
	t.Parallel()
	const (
		name = "redis-partition"
		ttl  = 500 * time.Millisecond
	)
	n := trials(200)
	r := newReport(name, n, controls(n))
	s, pool := newSink(t, "chaos_partition_")
	srv := redisproc.Start(t)
	rdbA, proxy := proxiedRedis(t, srv)
	ca, err := lease.New(rdbA, lease.Options{Prefix: "chaos:"})
	require.NoError(t, err)
	cb, err := lease.New(srv.Client(t, fastClient), lease.Options{Prefix: "chaos:", RetryMax: 20 * time.Millisecond})
	require.NoError(t, err)
	bar := newProgress(name, n+r.controls)

	type outcome struct {
		stale           int  // accepted writes the rule refuses
		attempted       bool // A's late write reached the sink after B's commit
		refused         bool // and the sink refused it
		signalledLate   bool
		successorFirst  bool
		signalDelay     time.Duration
		tokensIncreased bool
	}
	trial := func(i int, guarded bool) (o outcome) {
		ctx := trialCtx(t, 30*time.Second)
		lname, resource := fmt.Sprintf("partition-%d", i), fmt.Sprintf("partition-%d-%t", i, guarded)
		la, err := acquire(ctx, ca, lname, ttl)
		require.NoError(t, err)
		hA := holderOf(la)
		lost := make(chan time.Time, 1) // when A observed the end of its lease
		context.AfterFunc(la.Context(), func() { lost <- time.Now() })
		require.NoError(t, s.write(ctx, pool, resource, hA, "a-1", guarded), "A writes while it holds the lease")
		require.NoError(t, la.Err(), "A checks that it holds the lease before its next write")

		proxy.Stall() // the partition: A's requests to Redis get no answer
		lb, err := acquire(ctx, cb, lname, ttl)
		acquiredB := time.Now()
		require.NoError(t, err, "B takes the lease over once A's key expired")
		o.tokensIncreased = lb.Token() > la.Token()
		require.NoError(t, s.write(ctx, pool, resource, holderOf(lb), "b", guarded))

		// A's write, checked before the partition, lands now: after B's
		// commit, and Postgres answers it.
		errA := s.write(ctx, pool, resource, hA, "a-2-late", guarded)
		switch {
		case errA == nil:
			o.attempted = true
		case isStale(errA):
			o.attempted, o.refused = true, true
		default:
			require.NoError(t, errA, "A's late write")
		}

		testutilDone(t, la.Done(), "A observed the loss of its lease")
		lostAt := <-lost
		if due := la.Deadline(); !due.IsZero() {
			if lostAt.After(due) {
				o.signalDelay = lostAt.Sub(due)
				o.signalledLate = o.signalDelay > signalSlack
			}
			o.successorFirst = acquiredB.Before(lostAt)
		}
		proxy.Resume()
		if err := lb.Release(ctx); err != nil {
			require.ErrorIs(t, err, lease.ErrNotHeld) // a starved test process may lose it
		}
		_ = la.Release(ctx)
		es, err := s.effects(ctx, pool, resource)
		require.NoError(t, err)
		o.stale = staleAccepted(es)
		bar.step()
		return o
	}

	var stale, attempted, refused, late, successorFirst, increased int
	var maxDelay time.Duration
	for i := range n {
		o := trial(i, true)
		stale += o.stale
		if o.attempted {
			attempted++
			if o.refused {
				refused++
			}
		}
		if o.signalledLate {
			late++
			t.Logf("trial %d: A observed its loss %v after its trust window ended", i, o.signalDelay)
		}
		if o.successorFirst {
			successorFirst++
		}
		if o.tokensIncreased {
			increased++
		}
		maxDelay = max(maxDelay, o.signalDelay)
	}
	for i := range r.controls {
		if o := trial(n+i, false); o.attempted && o.stale > 0 {
			r.fired++
		}
	}
	r.violations = stale + late + (n - increased) + (attempted - refused)
	r.add("stale_accepted", stale)
	r.add("loss_signalled_late", late)
	r.ratio("successor_took_over", increased, n)
	r.ratio("late_write_attempted", attempted, n)
	r.ratio("refused", refused, attempted)
	r.add("max_signal_delay", maxDelay.Round(time.Millisecond))
	r.add("successor_before_signal", successorFirst)
	r.finish(t)
	require.GreaterOrEqual(t, attempted, mostTrials(n), "late writes attempted in all trials but 5%% (at least one)")
}
