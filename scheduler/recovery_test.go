package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// The recovery claim at Start reads the ledger first and takes a unit's
// lease only when there is something to recover: a restart of a replica
// with thousands of quiet units costs one read per unit, not an
// acquisition and a release. A ledger.StatesReader reads them in batches;
// a ledger without one, or a batch read that failed, is read unit by unit.
func TestRecoveryClaimTakesTheLeaseOnlyWhenNeeded(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		wrap func(*countingLedger) ledger.Ledger
	}{
		{"Batched", func(c *countingLedger) ledger.Ledger { return c }},
		{"UnitByUnit", func(c *countingLedger) ledger.Ledger { return stateOnly{c} }},
		{"BatchFailed", func(c *countingLedger) ledger.Ledger { return failingStates{c} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testRecoveryClaim(t, tc.wrap)
		})
	}
}

// stateOnly hides every optional interface of its ledger.
type stateOnly struct{ ledger.Ledger }

// failingStates is a StatesReader whose batch reads fail.
type failingStates struct{ *countingLedger }

func (failingStates) States(context.Context, []ledger.StateRequest, time.Time) ([]ledger.State, error) {
	return nil, errors.New("test: the batch read failed")
}

func testRecoveryClaim(t *testing.T, wrap func(*countingLedger) ledger.Ledger) {
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		asked := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // a fire of yearly
		clk := clock.NewFake(time.Date(2026, 3, 2, 10, 0, 0, 500e6, time.UTC))
		// An operator asked for a run of one partition while no replica ran.
		require.NoError(t, s.ledger.Request(ctx, ledger.Slot{Job: "quiet", At: asked, Partition: "asked"}, "test", clk.Now()))
		ran := make(chan Run, 2)
		counting := &countingLedger{Ledger: s.ledger}
		sched := s.started(t, Job{
			Name: "quiet", Spec: yearly, Partitions: []string{"idle", "asked"},
			Run: func(_ context.Context, run Run) error { ran <- run; return nil },
		}, func(c *Options) { c.Ledger = wrap(counting) }, onClock(clk))
		tickAll(t, clk, time.Millisecond, time.Millisecond, new(atomic.Int64), sched)

		require.Len(t, ran, 1)
		run := <-ran
		require.Equal(t, "asked", run.Slot.Partition)
		require.Equal(t, asked, run.Slot.At)
		require.Equal(t, ledger.StatusSucceeded, s.status("quiet", "asked", asked))
		fenceKey := func(partition string) string {
			return s.leasePrefix + "{" + ledger.UnitScope("quiet", partition) + "}:fence"
		}
		n, err := s.rdb.Exists(ctx, fenceKey("asked")).Result()
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "the unit with a request was claimed: its lease issued a token")
		n, err = s.rdb.Exists(ctx, fenceKey("idle")).Result()
		require.NoError(t, err)
		require.Zero(t, n, "the quiet unit's lease was never taken")
		counting.mu.Lock()
		states := counting.states
		counting.mu.Unlock()
		// One read per unit before the lease, and the claimed one's plan
		// under it.
		require.Equal(t, 3, states, "State calls")
	})
}

// The recovery at Start over two batches of reads (300 units) takes over
// an abandoned attempt (first batch), turns a stored retry still to come
// into a wake-up at its time (second batch), records the slots of a
// MissedSkip job missed during the downtime, and leaves a paused job's
// pending request alone.
func TestRecoveryAcrossBatches(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		asked := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // a fire of yearly
		clk := clock.NewFake(time.Date(2026, 3, 2, 10, 5, 0, 500e6, time.UTC))
		leases, err := lease.New(s.rdb, lease.Options{Prefix: s.leasePrefix})
		require.NoError(t, err)
		under := func(job, part string, fn func(f ledger.Fence)) {
			l, err := leases.TryAcquire(ctx, ledger.UnitScope(job, part), 10*time.Second)
			require.NoError(t, err)
			fn(ledger.Fence{Scope: l.Name(), Token: l.Token(), Owner: l.Holder().Owner})
			require.NoError(t, l.Release(ctx))
		}
		hourAgo := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC) // a fire of hourly, within CatchUpWindow
		// p5: a holder began the slot and died (its lease is gone).
		under("many", "p5", func(f ledger.Fence) {
			_, _, err := s.ledger.Begin(ctx, ledger.Slot{Job: "many", At: hourAgo, Partition: "p5"}, f, 3, clk.Now().Add(-time.Minute))
			require.NoError(t, err)
		})
		// p290: failed, its retry 10 s from now.
		retryAt := clk.Now().Add(10 * time.Second)
		under("many", "p290", func(f ledger.Fence) {
			sl := ledger.Slot{Job: "many", At: hourAgo, Partition: "p290"}
			n, _, err := s.ledger.Begin(ctx, sl, f, 3, clk.Now().Add(-time.Minute))
			require.NoError(t, err)
			require.NoError(t, s.ledger.Finish(ctx, sl, f, n, ledger.Outcome{Status: ledger.StatusFailed, Error: "x", Class: ledger.ClassRetryable, RetryAt: retryAt}, clk.Now().Add(-time.Minute)))
		})
		// minutely: last ran at 10:00, the replicas were down since.
		ran10 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
		_, err = s.ledger.State(ctx, "minutely", "", ran10.Add(-time.Hour), ran10.Add(-time.Hour)) // its horizon
		require.NoError(t, err)
		under("minutely", "", func(f ledger.Fence) {
			sl := ledger.Slot{Job: "minutely", At: ran10}
			n, _, err := s.ledger.Begin(ctx, sl, f, 3, ran10)
			require.NoError(t, err)
			require.NoError(t, s.ledger.Finish(ctx, sl, f, n, ledger.Outcome{Status: ledger.StatusSucceeded}, ran10))
		})
		// paused: a pending request, the job paused.
		require.NoError(t, s.ledger.Request(ctx, ledger.Slot{Job: "paused", At: asked}, "test", clk.Now()))
		require.NoError(t, s.ledger.SetPaused(ctx, "paused", true))

		var mu sync.Mutex
		var runs []Run
		record := func(_ context.Context, r Run) error { mu.Lock(); runs = append(runs, r); mu.Unlock(); return nil }
		parts := make([]string, 300)
		for i := range parts {
			parts[i] = fmt.Sprintf("p%d", i)
		}
		sched := s.replica(t, onClock(clk))
		require.NoError(t, sched.Register(Job{Name: "many", Spec: "0 0 * * * *", Partitions: parts, Run: record}))
		require.NoError(t, sched.Register(Job{Name: "minutely", Spec: "0 * * * * *", Missed: MissedSkip, Run: record}))
		require.NoError(t, sched.Register(Job{Name: "paused", Spec: yearly, Run: record}))
		require.NoError(t, sched.Start(ctx))
		tickAll(t, clk, time.Second, 100*time.Millisecond, new(atomic.Int64), sched)

		mu.Lock()
		got := append([]Run(nil), runs...)
		mu.Unlock()
		require.Len(t, got, 1, "only the abandoned slot ran so far: %v", got)
		require.Equal(t, "p5", got[0].Partition)
		require.Equal(t, 2, got[0].Attempt)
		for m := 1; m <= 5; m++ {
			at := ran10.Add(time.Duration(m) * time.Minute)
			require.Equal(t, ledger.StatusSkipped, s.status("minutely", "", at), "minutely %v", at)
		}
		tickAll(t, clk, 10*time.Second, 100*time.Millisecond, new(atomic.Int64), sched)
		mu.Lock()
		got = append([]Run(nil), runs...)
		mu.Unlock()
		require.Len(t, got, 2, "the retry ran at its time: %v", got)
		require.Equal(t, "p290", got[1].Partition)
		require.Equal(t, ledger.StatusPending, s.status("paused", "", asked))
	})
}

// nodeDown emulates that node on a single client: in the first pipeline
// that touches the keys of tag, those commands fail with a connection
// error, as ClusterClient reports a node it cannot reach, and the
// pipeline answers the first command's error in order, as
// ClusterClient.processPipeline does.
type nodeDown struct {
	tag   string
	armed atomic.Bool
}

func (*nodeDown) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (*nodeDown) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *nodeDown) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		touches := false
		for _, c := range cmds {
			for _, a := range c.Args() {
				if s, ok := a.(string); ok && strings.Contains(s, h.tag) {
					touches = true
				}
			}
		}
		if !touches || !h.armed.CompareAndSwap(true, false) {
			return err
		}
		down := errors.New("dial tcp 10.0.0.3:6379: connect: connection refused")
		for _, c := range cmds {
			hit := false
			for _, a := range c.Args() {
				if s, ok := a.(string); ok && strings.Contains(s, h.tag) {
					hit = true
				}
			}
			if !hit {
				continue
			}
			switch c := c.(type) {
			case *redis.StringSliceCmd:
				c.SetVal(nil)
			case *redis.ZSliceCmd:
				c.SetVal(nil)
			case *redis.StringCmd:
				c.SetVal("")
			case *redis.IntCmd:
				c.SetVal(0)
			case *redis.BoolCmd:
				c.SetVal(false)
			}
			c.SetErr(down)
		}
		for _, c := range cmds {
			if e := c.Err(); e != nil {
				return e
			}
		}
		return nil
	}
}

// A pipeline answers its first command's error only (go-redis; on a
// Cluster, ClusterClient.processPipeline too), and redis.Nil, the GET of
// a pair that never began a slot, is none. A batch read where an earlier
// pair was never begun and a later pair's node could not be reached (a
// failover during a rolling restart) must not read the later pair as
// empty: its recovery (here an operator's request of a yearly job) would
// wait for its next fire, a year later. Found in review: States answered
// the pipeline's first error only, and the request was not run.
func TestRecoveryNotLostToAPartlyFailedRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		wrap func(*redisledger.Ledger) ledger.Ledger
	}{
		{"Batched", func(l *redisledger.Ledger) ledger.Ledger { return l }},
		{"UnitByUnit", func(l *redisledger.Ledger) ledger.Ledger { return stateOnly{l} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachBackend(t, func(t *testing.T, s *setup) {
				ctx := context.Background()
				asked := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // a fire of yearly
				clk := clock.NewFake(time.Date(2026, 3, 2, 10, 0, 0, 500e6, time.UTC))
				// "fresh" never ran (its last key is missing); an operator
				// asked for a run of "asked" while no replica ran.
				require.NoError(t, s.ledger.Request(ctx, ledger.Slot{Job: "manual", At: asked, Partition: "asked"}, "test", clk.Now()))

				h := &nodeDown{tag: "{" + ledger.UnitScope("manual", "asked") + "}"}
				h.armed.Store(true)
				rdb := redis.NewClient(s.rdb.(*redis.Client).Options())
				rdb.AddHook(h)
				t.Cleanup(func() { _ = rdb.Close() })
				l, err := redisledger.New(rdb, redisledger.Options{Prefix: s.ledgerPrefix})
				require.NoError(t, err)
				leases, err := lease.New(s.rdb, lease.Options{Prefix: s.leasePrefix})
				require.NoError(t, err)

				ran := make(chan Run, 2)
				sched := s.started(t, Job{
					Name: "manual", Spec: yearly, Partitions: []string{"fresh", "asked"},
					Run: func(_ context.Context, run Run) error { ran <- run; return nil },
				}, func(c *Options) { c.Leases, c.Ledger = leases, tc.wrap(l) }, onClock(clk))
				tickAll(t, clk, 3*time.Second, 100*time.Millisecond, new(atomic.Int64), sched)

				require.False(t, h.armed.Load(), "the node was down for the first read")
				require.Len(t, ran, 1, "the operator's request is run at Start")
				require.Equal(t, ledger.StatusSucceeded, s.status("manual", "asked", asked))
			})
		})
	}
}
