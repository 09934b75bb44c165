package scheduler

import (
	"context"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
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

// A replica whose clock is ahead of the store's with Retention ==
// ledger.PruneMargin asks for a cutoff the store refuses (later than its
// own clock minus the margin); it prunes to the store's limit instead, so
// that the records do not grow for ever. Control: without the fallback
// every Prune is refused and the old slot stays.
func TestRetentionOfTheMarginPrunesWithAClockAhead(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := t.Context()
		now := time.Now().UTC().Truncate(time.Second)
		clk := clock.NewFake(now.Add(10 * time.Minute)) // ahead of Redis' TIME
		old := ledger.Slot{Job: "pruned", At: now.Add(-3 * time.Hour)}
		last := ledger.Slot{Job: "pruned", At: now.Add(-170 * time.Minute)}
		f := ledger.Fence{Scope: ledger.UnitScope("pruned", ""), Token: fence.Token(1), Owner: "seed"}
		for _, sl := range []ledger.Slot{old, last} {
			require.NoError(t, s.ledger.Skip(ctx, sl, f, ledger.StatusSkipped, "seeded", sl.At))
		}
		sched := s.replica(t, onClock(clk), func(o *Options) { o.Retention = ledger.PruneMargin })
		require.NoError(t, sched.Start(ctx))

		testwait.Until(t, 10*time.Second, "the old slot pruned", func() bool {
			clk.Advance(pruneInterval(ledger.PruneMargin))
			_, found, err := s.ledger.Get(ctx, old)
			require.NoError(t, err)
			return !found
		})
		st, err := s.ledger.State(ctx, "pruned", "", old.At, now)
		require.NoError(t, err)
		require.False(t, st.Pruned.After(time.Now().Add(-ledger.PruneMargin)), "the cutoff is the store's limit at the latest: %v", st.Pruned)
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
	for _, r := range []time.Duration{time.Second, ledger.PruneMargin - time.Second} {
		_, err = New(Options{Leases: leases, Ledger: ledgertest.NewMemory(), Retention: r})
		require.ErrorIs(t, err, ErrInvalidOptions, "Retention %v, below ledger.PruneMargin", r)
		require.ErrorContains(t, err, "PruneMargin")
	}
	_, err = New(Options{Leases: leases, Ledger: hiddenPruner{ledgertest.NewMemory()}, Retention: time.Hour})
	require.ErrorIs(t, err, ErrInvalidOptions)
	_, err = New(Options{Leases: leases, Ledger: ledgertest.NewMemory(), Retention: time.Hour})
	require.NoError(t, err)
	require.Equal(t, time.Minute, pruneInterval(time.Second))
	require.Equal(t, time.Hour, pruneInterval(30*24*time.Hour))
	require.Equal(t, 6*time.Minute, pruneInterval(time.Hour))
}

// prunedScopes records PruneSlotScopes calls (a fence.SlotScopePruner).
type prunedScopes struct {
	mu    sync.Mutex
	calls map[string]time.Time // "resource unit" -> the last before
}

func (p *prunedScopes) PruneSlotScopes(_ context.Context, resource, unit string, before time.Time) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls[resource+" "+unit] = before
	return 1, nil
}

func (p *prunedScopes) seen() map[string]time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return maps.Clone(p.calls)
}

// With Retention, the replica that prunes the ledger prunes the slot
// scopes of every partition of an OverlapAllow job in each of its
// SlotScopeSinks, at the ledger's cutoff, and logs it.
func TestRetentionPrunesTheSlotScopeSinks(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := t.Context()
		start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		clk := clock.NewFake(start)
		sink := &prunedScopes{calls: map[string]time.Time{}}
		logs := &syncBuffer{}
		sched := s.replica(t, onClock(clk), func(o *Options) {
			o.Retention = 24 * time.Hour
			o.Logger = slog.New(slog.NewJSONHandler(logs, nil))
		})
		require.NoError(t, sched.Register(Job{Name: "invoice", Spec: "@yearly", Overlap: OverlapAllow, Partitions: []string{"eu", "us"}, Timeout: time.Hour,
			Run:            func(context.Context, Run) error { return nil },
			SlotScopeSinks: []SlotScopeSink{{Resource: "invoices", Sink: sink}}}))
		require.NoError(t, sched.Start(ctx))
		testwait.Until(t, 10*time.Second, "both partitions' slot scopes pruned", func() bool {
			clk.Advance(pruneInterval(24 * time.Hour))
			return len(sink.seen()) == 2
		})
		calls := sink.seen()
		for _, unit := range []string{"invoice|eu", "invoice|us"} {
			before, ok := calls["invoices "+unit]
			require.True(t, ok, "unit %s pruned", unit)
			require.True(t, before.After(start.Add(-24*time.Hour)) && !before.After(clk.Now().Add(-24*time.Hour)),
				"the ledger's cutoff, now minus Retention: %v", before)
		}
		testwait.Until(t, 10*time.Second, "the prune logged", func() bool {
			return strings.Contains(logs.String(), `"msg":"sink_slot_scopes_pruned"`)
		})
		require.Contains(t, logs.String(), `"resource":"invoices"`)
	})
}

func TestSlotScopeSinksAreForOverlapAllowWithRetention(t *testing.T) {
	t.Parallel()
	s := newSetup(t, redistest.Backend{Name: "miniredis", New: redistest.Mini})
	run := func(context.Context, Run) error { return nil }
	sinks := []SlotScopeSink{{Resource: "r", Sink: &prunedScopes{}}}
	withRetention := s.replica(t, func(o *Options) { o.Retention = time.Hour })
	require.ErrorIs(t, withRetention.Register(Job{Name: "forbid", Spec: "@daily", Run: run, SlotScopeSinks: sinks}), ErrInvalidJob)
	require.ErrorIs(t, withRetention.Register(Job{Name: "empty", Spec: "@daily", Run: run, Overlap: OverlapAllow,
		SlotScopeSinks: []SlotScopeSink{{Sink: &prunedScopes{}}}}), ErrInvalidJob)
	var nilSink *prunedScopes
	require.ErrorIs(t, withRetention.Register(Job{Name: "nil", Spec: "@daily", Run: run, Overlap: OverlapAllow,
		SlotScopeSinks: []SlotScopeSink{{Resource: "r", Sink: nilSink}}}), ErrInvalidJob)
	require.ErrorIs(t, withRetention.Register(Job{Name: "no-timeout", Spec: "@daily", Run: run, Overlap: OverlapAllow, SlotScopeSinks: sinks}), ErrInvalidJob)
	require.ErrorIs(t, withRetention.Register(Job{Name: "long", Spec: "@daily", Run: run, Overlap: OverlapAllow, Timeout: time.Hour, SlotScopeSinks: sinks}), ErrInvalidJob,
		"a Timeout as long as Retention")
	require.NoError(t, withRetention.Register(Job{Name: "allow", Spec: "@daily", Run: run, Overlap: OverlapAllow, Timeout: time.Minute, SlotScopeSinks: sinks}))
	noRetention := s.replica(t)
	require.ErrorIs(t, noRetention.Register(Job{Name: "allow", Spec: "@daily", Run: run, Overlap: OverlapAllow, Timeout: time.Minute, SlotScopeSinks: sinks}), ErrInvalidJob)
}

// A prune cutoff in the future (2999, or a relative one from a clock that
// is ahead) is refused by the ledger, and an OverlapAllow job, whose
// slots the cutoff would have closed, keeps running afterwards.
func TestFuturePruneCutoffIsRefusedAndOverlapAllowRunsOn(t *testing.T) {
	eachBackend(t, func(t *testing.T, s *setup) {
		var runs atomic.Int64
		a := s.replica(t)
		require.NoError(t, a.Register(Job{Name: "allow", Spec: everySecond, Overlap: OverlapAllow,
			Run: func(context.Context, Run) error { runs.Add(1); return nil }}))
		require.NoError(t, a.Start(t.Context()))
		testwait.Until(t, 10*time.Second, "a first run", func() bool { return runs.Load() >= 1 })

		var errs []error
		for _, cutoff := range []time.Time{time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC), time.Now().Add(time.Hour)} {
			n, err := s.ledger.Prune(t.Context(), cutoff)
			require.Zero(t, n, "nothing pruned")
			errs = append(errs, err)
			_, _, err = s.ledger.PrunePreview(t.Context(), cutoff, 10)
			errs = append(errs, err)
		}
		after := runs.Load()
		testwait.Until(t, 10*time.Second, "three more runs after the refused Prune", func() bool { return runs.Load() >= after+3 })
		for _, err := range errs {
			require.ErrorIs(t, err, ledger.ErrPruneCutoff)
		}
	})
}
