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
