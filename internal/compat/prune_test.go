package compat_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/pgledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// prunedSlotWrites runs the scenario of a pruned OverlapAllow slot: holder
// A runs slot S under S's own lease, the unit moves on, Prune deletes S's
// record and its slot fence; then A, stale (paused past everything), tries
// S again. forget, when not nil, runs right after the Prune: the control
// removes the pair's prune cutoff there, as a naive prune that deletes
// slot fences without closing their slots would leave it. It returns how
// many of A's late writes the ledger accepted (violations).
func prunedSlotWrites(t *testing.T, l ledger.Ledger, forget func()) (violations int) {
	ctx := t.Context()
	at := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)
	s := ledger.Slot{Job: "allow", At: at}
	a := ledger.Fence{Scope: ledger.SlotScope(s), Token: 1_000_000, Owner: "holder-a"}
	n, _, err := l.Begin(ctx, s, a, 3, at)
	require.NoError(t, err)
	require.NoError(t, l.Finish(ctx, s, a, n, ledger.Outcome{Status: ledger.StatusSucceeded}, at.Add(time.Second)))
	next := ledger.Slot{Job: "allow", At: at.Add(time.Minute)}
	unit := ledger.Fence{Scope: ledger.UnitScope("allow", ""), Token: 2_000_000, Owner: "planner"}
	require.NoError(t, l.Skip(ctx, next, unit, ledger.StatusSkipped, "later", next.At))
	_, err = l.(ledger.Pruner).Prune(ctx, next.At)
	require.NoError(t, err)
	_, found, err := l.Get(ctx, s)
	require.NoError(t, err)
	require.False(t, found, "the slot's record is pruned")
	if forget != nil {
		forget()
	}
	late := at.Add(time.Hour)
	for _, write := range []func() error{
		func() error { _, _, err := l.Begin(ctx, s, a, 3, late); return err },
		func() error { return l.Skip(ctx, s, a, ledger.StatusSkipped, "late", late) },
	} {
		err := write()
		switch {
		case err == nil:
			violations++
		case !errors.Is(err, fence.ErrStaleToken):
			require.NoError(t, err)
		}
	}
	return violations
}

// Prune deletes an OverlapAllow slot's own fence with its record without
// letting the slot's stale holder back in: the slot is closed below the
// pair's prune cutoff. The control removes the cutoff (a naive prune of
// slot fences) and the stale holder's writes land.
func TestPrunedSlotScopeStaysClosed(t *testing.T) {
	t.Parallel()
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		rdb := redistest.Real(t)
		newLedger := func() (*redisledger.Ledger, string) {
			prefix := redistest.Prefix(t, rdb)
			l, err := redisledger.New(rdb, redisledger.Options{Prefix: prefix})
			require.NoError(t, err)
			return l, prefix
		}
		l, _ := newLedger()
		require.Zero(t, prunedSlotWrites(t, l, nil), "violations")
		l, prefix := newLedger()
		control := prunedSlotWrites(t, l, func() {
			require.NoError(t, rdb.Del(context.Background(), prefix+"{allow}:pruned").Err())
		})
		require.Equal(t, 2, control, "control: the stale holder's writes land without the cutoff")
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		pool := shared.Pool(t)
		newLedger := func() (*pgledger.Ledger, string) {
			schema := pgtest.Schema(t, pool, "compat_")
			l, err := pgledger.New(pool, pgledger.Options{Schema: schema})
			require.NoError(t, err)
			require.NoError(t, l.Migrate(t.Context()))
			return l, schema
		}
		l, _ := newLedger()
		require.Zero(t, prunedSlotWrites(t, l, nil), "violations")
		l, schema := newLedger()
		control := prunedSlotWrites(t, l, func() {
			_, err := pool.Exec(context.Background(), `UPDATE `+pgx.Identifier{schema, "job_fences"}.Sanitize()+` SET pruned_before = NULL`)
			require.NoError(t, err)
		})
		require.Equal(t, 2, control, "control: the stale holder's writes land without the cutoff")
	})
}
