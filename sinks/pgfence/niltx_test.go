package pgfence

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

func TestCheckRefusesNilTransaction(t *testing.T) {
	t.Parallel()
	g, err := New(Config{})
	require.NoError(t, err)
	require.ErrorIs(t, g.Check(context.Background(), nil, "res", 1, "owner"), ErrInvalidConfig)
	var tx pgx.Tx
	require.ErrorIs(t, g.Check(context.Background(), tx, "res", 1, "owner"), ErrInvalidConfig)
}
