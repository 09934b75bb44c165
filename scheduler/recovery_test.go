package scheduler

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
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
