package httpfencetest_test

import (
	"context"
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
