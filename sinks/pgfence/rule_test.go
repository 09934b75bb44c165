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

// FencedUpdate and FencedUpsert on a caller's table pass the same table:
// their predicate is the guard's rule (fencerule.SQLAccepts) inside the
// row's own checks (no token yet, scope). FencedUpdate's row exists before
// its first write, fence columns NULL, as an application creates it.
func TestFencedUpdatePassesTheRuleTable(t *testing.T) {
	t.Parallel()
	tb := newTable(t)
	fenceruletest.Run(t, "", math.MaxInt64, func(ctx context.Context, resource string, h fence.Holder) error {
		_, err := tb.pool.Exec(ctx, `INSERT INTO `+tb.ident.Sanitize()+` (id) VALUES ($1) ON CONFLICT (id) DO NOTHING`, resource)
		require.NoError(t, err)
		return pgfence.FencedUpdate(ctx, tb.pool, tb.row(resource), map[string]any{"value": h.Owner}, h)
	})
}

func TestFencedUpsertPassesTheRuleTable(t *testing.T) {
	t.Parallel()
	tb := newTable(t)
	fenceruletest.Run(t, "", math.MaxInt64, func(ctx context.Context, resource string, h fence.Holder) error {
		return pgfence.FencedUpsert(ctx, tb.pool, tb.row(resource), map[string]any{"value": h.Owner}, h)
	})
}
