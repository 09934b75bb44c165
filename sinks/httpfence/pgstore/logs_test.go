package pgstore_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore"
	"github.com/holdfast-go/holdfast/sinks/httpfence/pgstore"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// TestQueryLogsNeverShowTheOwner: what pgx's tracelog logs of every
// statement (the arguments included) never holds a holder's owner (a
// write capability): BeginFenced (the joined claim and fence, a plain and
// a slot scope, and a stale token refused) and Fence.Accept. The owner
// still reaches the fence.
func TestQueryLogsNeverShowTheOwner(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var logged *pgtest.Args
	pool := pgtest.OwnPool(t, func(cfg *pgxpool.Config) { logged = pgtest.RecordArgs(cfg) })
	schema := pgtest.Schema(t, pool, "pgstore_test_")
	store, err := pgstore.NewStore(pool, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	guard, err := pgstore.NewFence(pool, pgfence.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, store.Migrate(ctx))
	require.NoError(t, guard.Migrate(ctx))

	h := fence.Holder{Token: 10, Owner: "c4cf6eb9f6f86911b62410cefdeb973e", Scope: "settle"}
	slot := fence.Holder{Token: 7, Owner: "0f2b2d0e4c3a40c1a5e8f1d2c3b4a596", Scope: "settle|eu@1772928000"}
	stale := fence.Holder{Token: 9, Owner: "9d8c7b6a5f4e3d2c1b0a998877665544", Scope: "settle"}
	out, err := store.BeginFenced(ctx, "k1", "f1", time.Minute, guard, "/pay", h)
	require.NoError(t, err)
	require.Equal(t, idemstore.StateNew, out.State)
	out, err = store.BeginFenced(ctx, "k2", "f2", time.Minute, guard, "/pay", slot)
	require.NoError(t, err)
	require.Equal(t, idemstore.StateNew, out.State)
	_, err = store.BeginFenced(ctx, "k3", "f3", time.Minute, guard, "/pay", stale)
	require.ErrorIs(t, err, fence.ErrStaleToken)
	require.NoError(t, guard.Accept(ctx, "/refund", h))
	_, owner, err := guard.Guard().Current(ctx, pool, "/pay", h.Scope)
	require.NoError(t, err)
	require.Equal(t, h.Owner, owner, "the owner reached the fence")

	require.Empty(t, logged.Showing(h.Owner, slot.Owner, stale.Owner), "a query log shows an owner")
	require.Greater(t, logged.Count(), 3)
	require.Contains(t, logged.String(), "[owner]")
}
