package httpfencetest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/httpfencetest"
	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore"
	"github.com/holdfast-go/holdfast/sinks/sinktest"
)

var _ fence.SlotScopePruner = (*httpfencetest.MemoryFence)(nil)

// TestMemoryFenceConformance runs the sink contract on MemoryFence,
// SlotScopesClose included: it is a fence.SlotScopePruner, so
// sinktest.FenceSink makes a SlotScopeSink of it.
func TestMemoryFenceConformance(t *testing.T) {
	t.Parallel()
	sinktest.Exercise(t, func(t *testing.T) sinktest.Sink {
		s := sinktest.FenceSink(httpfencetest.NewMemoryFence())
		_, ok := s.(sinktest.SlotScopeSink)
		require.True(t, ok, "MemoryFence's sink is a SlotScopeSink: SlotScopesClose runs")
		return s
	})
}

func TestMemoryFencePruneSlotScopesRefusesBadCalls(t *testing.T) {
	t.Parallel()
	f := httpfencetest.NewMemoryFence()
	now := time.Now()
	_, err := f.PruneSlotScopes(t.Context(), "", "u", now)
	require.ErrorIs(t, err, httpfence.ErrInvalidOptions)
	_, err = f.PruneSlotScopes(t.Context(), "/pay", "", now)
	require.ErrorIs(t, err, httpfence.ErrInvalidOptions)
	var nilCtx context.Context
	_, err = f.PruneSlotScopes(nilCtx, "/pay", "u", now)
	require.ErrorIs(t, err, idemstore.ErrNilContext)
}

// A cutoff later than time.Now minus the margin is refused with a
// *fence.PruneCutoffError and changes nothing: the slot just below it
// keeps its fence and takes its holder's Accept. An older cutoff prunes as
// before. SetPruneMargin shortens the margin; d <= 0 restores
// fence.PruneMargin.
func TestMemoryFencePruneSlotScopesRefusesACutoffOfSlotsThatMayStillRun(t *testing.T) {
	t.Parallel()
	f := httpfencetest.NewMemoryFence()
	ctx := t.Context()
	const res, unit = "/settle", "settle|eu"
	now := time.Now()
	holder := func(at time.Time, tok fence.Token) fence.Holder {
		return fence.Holder{Scope: fmt.Sprintf("%s@%d", unit, at.Unix()), Token: tok, Owner: "a"}
	}
	old, recent := holder(now.Add(-3*fence.PruneMargin), 5), holder(now.Add(-2*time.Minute), 7)
	require.NoError(t, f.Accept(ctx, res, old))
	require.NoError(t, f.Accept(ctx, res, recent))

	for _, cutoff := range []time.Time{now.Add(time.Hour), now, now.Add(-fence.PruneMargin + time.Minute)} {
		n, err := f.PruneSlotScopes(ctx, res, unit, cutoff)
		require.ErrorIs(t, err, fence.ErrPruneCutoff, "%v", cutoff)
		var ce *fence.PruneCutoffError
		require.ErrorAs(t, err, &ce)
		require.True(t, ce.Before.Equal(cutoff))
		require.Equal(t, fence.PruneMargin, ce.Margin)
		require.Equal(t, ce.Now.Add(-fence.PruneMargin), ce.Limit)
		require.Zero(t, n)
	}
	require.NoError(t, f.Accept(ctx, res, recent), "the slot below the refused cutoffs is open")
	err := f.Accept(ctx, res, fence.Holder{Scope: recent.Scope, Token: 6, Owner: "b"})
	require.ErrorIs(t, err, fence.ErrStaleToken)
	require.NotErrorIs(t, err, fence.ErrScopeClosed, "and keeps its fence")
	require.NoError(t, f.Accept(ctx, res, old))

	n, err := f.PruneSlotScopes(ctx, res, unit, now.Add(-fence.PruneMargin-time.Minute))
	require.NoError(t, err, "a cutoff older than the limit")
	require.Equal(t, 1, n)
	require.ErrorIs(t, f.Accept(ctx, res, old), fence.ErrScopeClosed)

	// A shorter margin takes a cutoff a minute behind the clock.
	f.SetPruneMargin(time.Minute)
	n, err = f.PruneSlotScopes(ctx, res, unit, now.Add(-time.Minute))
	require.NoError(t, err)
	require.Equal(t, 1, n, "the recent slot")
	require.ErrorIs(t, f.Accept(ctx, res, recent), fence.ErrScopeClosed)
	f.SetPruneMargin(0)
	_, err = f.PruneSlotScopes(ctx, res, unit, time.Now().Add(-time.Minute))
	require.ErrorIs(t, err, fence.ErrPruneCutoff, "the default margin again")
}
