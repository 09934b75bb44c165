package pgfence_test

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/fencerule/fenceruletest"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// The shared case table of the acceptance rule, through Check (tokens up
// to the bigint maximum).
func TestCheckPassesTheRuleTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fenceruletest.Run(t, "", math.MaxInt64, func(ctx context.Context, resource string, h fence.Holder) error {
		return b.guard.Check(ctx, b.pool, resource, h)
	})
}

// Above the bigint maximum Check refuses with ErrTokenOutOfRange, never a
// decision.
func TestCheckRefusesTokensAboveInt64(t *testing.T) {
	t.Parallel()
	b := setup(t)
	err := b.guard.Check(t.Context(), b.pool, "r", fence.Holder{Token: math.MaxInt64 + 1, Owner: "a"})
	require.ErrorIs(t, err, pgfence.ErrTokenOutOfRange)
	require.NotErrorIs(t, err, fence.ErrStaleToken)
}
