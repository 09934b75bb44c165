package pgfence_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// Reset is the operator's way out of a poisoned fence: it refuses a fence
// raised within IdleFor or changed since it was read, then removes it, and
// the next legitimate holder (whose token is below the forged one) is
// accepted; another scope's fence is untouched.
func TestResetRemovesAPoisonedFence(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	check := func(scope string, token fence.Token, owner string) error {
		return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			return b.guard.Check(ctx, tx, "payouts", fence.Holder{Scope: scope, Token: token, Owner: owner})
		})
	}
	require.NoError(t, check("push", 1000, "holder-a"))
	require.NoError(t, check("other", 5, "holder-x"))
	require.NoError(t, check("push", 9_000_000, "evil")) // the forgery
	require.ErrorIs(t, check("push", 1001, "holder-b"), fence.ErrStaleToken, "poisoned")

	// Nothing to reset.
	res, err := b.guard.Reset(ctx, b.pool, "payouts", "absent", pgfence.ResetOptions{})
	require.NoError(t, err)
	require.Equal(t, pgfence.ResetResult{}, res)

	// Raised just now: active.
	res, err = b.guard.Reset(ctx, b.pool, "payouts", "push", pgfence.ResetOptions{IdleFor: time.Hour})
	require.ErrorIs(t, err, pgfence.ErrFenceActive)
	require.Equal(t, fence.Token(9_000_000), res.Token)
	require.WithinDuration(t, time.Now(), res.UpdatedAt, time.Minute)
	// The operator read another token than the one stored: changed.
	_, err = b.guard.Reset(ctx, b.pool, "payouts", "push", pgfence.ResetOptions{Expect: 8_999_999})
	require.ErrorIs(t, err, pgfence.ErrFenceChanged)
	cur, _, err := b.guard.Current(ctx, b.pool, "payouts", "push")
	require.NoError(t, err)
	require.Equal(t, fence.Token(9_000_000), cur, "refused resets change nothing")

	// Idle long enough (by the database clock: updated_at moved back).
	_, err = b.pool.Exec(ctx, `UPDATE `+pgx.Identifier{b.schema, pgfence.DefaultTable}.Sanitize()+
		` SET updated_at = updated_at - interval '2 hours' WHERE scope = 'push'`)
	require.NoError(t, err)
	res, err = b.guard.Reset(ctx, b.pool, "payouts", "push", pgfence.ResetOptions{Expect: 9_000_000, IdleFor: time.Hour})
	require.NoError(t, err)
	require.Equal(t, fence.Token(9_000_000), res.Token)

	require.NoError(t, check("push", 1001, "holder-b"), "the next legitimate holder is accepted")
	require.ErrorIs(t, check("push", 1000, "holder-a"), fence.ErrStaleToken, "and fences again")
	other, _, err := b.guard.Current(ctx, b.pool, "payouts", "other")
	require.NoError(t, err)
	require.Equal(t, fence.Token(5), other, "another scope is untouched")
}

func TestResetBadInput(t *testing.T) {
	t.Parallel()
	g, err := pgfence.New(pgfence.Options{})
	require.NoError(t, err)
	_, err = g.Reset(context.Background(), nil, "r", "s", pgfence.ResetOptions{})
	require.ErrorIs(t, err, pgfence.ErrInvalidOptions)
	_, err = g.Reset(context.Background(), testPool(t), "", "s", pgfence.ResetOptions{})
	require.ErrorIs(t, err, pgfence.ErrInvalidResource)
	_, err = g.Reset(context.Background(), testPool(t), "r", "s", pgfence.ResetOptions{IdleFor: -1})
	require.ErrorIs(t, err, pgfence.ErrInvalidOptions)
	_, err = (*pgfence.Guard)(nil).Reset(context.Background(), testPool(t), "r", "s", pgfence.ResetOptions{})
	require.ErrorIs(t, err, pgfence.ErrNotCreated)
}
