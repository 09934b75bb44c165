package pglease_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/pglease"
)

// PruneIdle deletes the rows of leases free and last acquired more than
// idle ago, keeps held ones and recent ones, and a pruned name's next
// token still exceeds the last one (the clock floor).
func TestPruneIdle(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b, table := newBackend(t)
	pool := shared.Pool(t)
	_, err := b.PruneIdle(ctx, time.Minute)
	require.ErrorIs(t, err, pglease.ErrInvalidOptions)

	grant := func(name string) leasedriver.Grant {
		g, err := b.Acquire(ctx, name, "owner-1", time.Hour)
		require.NoError(t, err)
		require.True(t, g.Acquired)
		return g
	}
	old := grant("old")
	require.NoError(t, b.Release(ctx, leasedriver.Held{Name: "old", Owner: "owner-1", TTL: time.Hour}))
	grant("held")
	grant("recent")
	require.NoError(t, b.Release(ctx, leasedriver.Held{Name: "recent", Owner: "owner-1", TTL: time.Hour}))
	// Age "old" and "held" by three hours, as if acquired then.
	_, err = pool.Exec(ctx, `UPDATE `+table+
		` SET token = token - 3::bigint * 3600 * 1000000 WHERE name IN ('old', 'held')`)
	require.NoError(t, err)

	n, err := b.PruneIdle(ctx, 2*time.Hour)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	rows, err := pool.Query(ctx, `SELECT name FROM `+table+` ORDER BY name`)
	require.NoError(t, err)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"held", "recent"}, names, "held and recent rows stay")

	again := grant("old")
	require.Greater(t, again.Token, old.Token, "the clock floor after the row went")
}
