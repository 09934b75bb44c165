package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/ledgertest"
)

// Options.Retention prunes done slots older than Retention every
// pruneInterval, and keeps the pair's latest slot.
func TestRetentionPrunesDoneSlotsPeriodically(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := t.Context()
		start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		clk := clock.NewFake(start)
		old := ledger.Slot{Job: "pruned", At: start.Add(-48 * time.Hour)}
		last := ledger.Slot{Job: "pruned", At: start.Add(-47 * time.Hour)}
		f := ledger.Fence{Scope: ledger.UnitScope("pruned", ""), Token: fence.Token(1), Owner: "seed"}
		for _, sl := range []ledger.Slot{old, last} {
			require.NoError(t, s.ledger.Skip(ctx, sl, f, ledger.StatusSkipped, "seeded", sl.At))
		}
		sched := s.replica(t, onClock(clk), func(o *Options) { o.Retention = 24 * time.Hour })
		require.NoError(t, sched.Start(ctx))

		testwait.Until(t, 10*time.Second, "the old slot pruned", func() bool {
			clk.Advance(pruneInterval(24 * time.Hour)) // the loop's timer may start after an Advance: tick again
			_, found, err := s.ledger.Get(ctx, old)
			require.NoError(t, err)
			return !found
		})
		_, found, err := s.ledger.Get(ctx, last)
		require.NoError(t, err)
		require.True(t, found, "the pair's latest slot is kept")
	})
}

// hiddenPruner is a ledger whose Prune the scheduler cannot see.
type hiddenPruner struct{ ledger.Ledger }

func TestRetentionNeedsAPrunerAndIsNotNegative(t *testing.T) {
	t.Parallel()
	s := newSetup(t, redistest.Backend{Name: "miniredis", New: redistest.Mini})
	leases := s.replica(t).cfg.Leases
	_, err := New(Options{Leases: leases, Ledger: ledgertest.NewMemory(), Retention: -time.Second})
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = New(Options{Leases: leases, Ledger: hiddenPruner{ledgertest.NewMemory()}, Retention: time.Hour})
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = New(Options{Leases: leases, Ledger: ledgertest.NewMemory(), Retention: time.Hour})
	require.NoError(t, err)
	require.Equal(t, time.Minute, pruneInterval(time.Second))
	require.Equal(t, time.Hour, pruneInterval(30*24*time.Hour))
	require.Equal(t, 6*time.Minute, pruneInterval(time.Hour))
}
