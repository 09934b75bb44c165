package pgfence

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/stretchr/testify/require"
)

func TestCheckRefusesNilTransaction(t *testing.T) {
	t.Parallel()
	g, err := New(Options{})
	require.NoError(t, err)
	require.ErrorIs(t, g.Check(context.Background(), nil, "res", fence.Holder{Token: 1, Owner: "owner"}), ErrInvalidOptions)
	var tx pgx.Tx
	require.ErrorIs(t, g.Check(context.Background(), tx, "res", fence.Holder{Token: 1, Owner: "owner"}), ErrInvalidOptions)
}

// A nil context is bad input: an error before the database is touched,
// never a panic.
func TestNilContextIsRefused(t *testing.T) {
	t.Parallel()
	g, err := New(Options{})
	require.NoError(t, err)
	var nilCtx context.Context
	var db DBTX = untouched{}
	h := fence.Holder{Token: 1, Owner: "owner"}
	row := Row{Table: pgx.Identifier{"t"}, KeyColumn: "id", Key: 1}
	_, _, currentErr := g.Current(nilCtx, db, "res", "")
	for name, err := range map[string]error{
		"Check":        g.Check(nilCtx, db, "res", h),
		"Current":      currentErr,
		"Migrate":      g.Migrate(nilCtx, db),
		"FencedUpdate": FencedUpdate(nilCtx, db, row, map[string]any{"v": 1}, h),
		"FencedUpsert": FencedUpsert(nilCtx, db, row, map[string]any{"v": 1}, h),
	} {
		require.ErrorIs(t, err, ErrInvalidOptions, name)
		require.ErrorContains(t, err, "nil context", name)
	}
}

// untouched is a DBTX that panics if it is used.
type untouched struct{ DBTX }
