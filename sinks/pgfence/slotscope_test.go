package pgfence_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
	"github.com/holdfast-go/holdfast/sinks/sinktest"
)

// naivePruneSink is guardSink with a prune that deletes the guard rows of
// the pruned slot scopes and keeps no watermark: the negative control of
// sinktest.CheckSlotScopesClose.
type naivePruneSink struct{ guardSink }

func (s naivePruneSink) PruneSlotScopes(ctx context.Context, resource, unit string, before time.Time) (int, error) {
	tag, err := s.b.pool.Exec(ctx, `DELETE FROM `+pgx.Identifier{s.b.schema, pgfence.DefaultTable}.Sanitize()+`
		WHERE resource = $1 AND starts_with(scope, $2 || '@') AND substr(scope, length($2) + 2) ~ '^(0|-?[1-9][0-9]*)$'
		  AND substr(scope, length($2) + 2)::bigint < $3`, resource, unit, before.Unix())
	return int(tag.RowsAffected()), err
}

// A prune that deletes the fences of pruned slots without closing their
// scopes lets the stale holder of such a slot write again: the check of
// the conformance suite reports it, and passes the real prune.
func TestSlotScopesNaivePruneReopensTheWindow(t *testing.T) {
	t.Parallel()
	naive := naivePruneSink{guardSinkOn(t, setup(t)).(guardSink)}
	err := sinktest.CheckSlotScopesClose(t.Context(), naive, "naive")
	require.Error(t, err)
	require.Contains(t, err.Error(), "ACCEPTED")
	t.Logf("the control, as reported: %v", err)

	real := guardSinkOn(t, setup(t)).(guardSink)
	require.NoError(t, sinktest.CheckSlotScopesClose(t.Context(), real, "real"))
}

// pruneInFlight runs PruneSlotScopes's two statements for (resource,
// unit, before) in a transaction it leaves open: a prune that has raised
// the watermark and deleted the guard rows below it, and not committed.
func pruneInFlight(t *testing.T, b *bundle, resource, unit string, before int64) pgx.Tx {
	t.Helper()
	ctx := t.Context()
	raise, deleteBelow := pgfence.PruneStatements(b.guard)
	tx, err := b.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	cutoff, margin := time.Unix(before, 0), fence.PruneMargin.Microseconds()
	var (
		now    time.Time
		passed bool
	)
	require.NoError(t, tx.QueryRow(ctx, raise, resource, unit, before, cutoff, margin).Scan(&now, &passed))
	require.True(t, passed, "the cutoff passes")
	var deleted int
	require.NoError(t, tx.QueryRow(ctx, deleteBelow, resource, unit, cutoff, margin).Scan(&deleted))
	require.Equal(t, 1, deleted, "the prune deleted the slot's guard row")
	return tx
}

// staleCheckBehindPrune starts, on a connection of its own in a
// transaction at isolation, the Check of a stale holder (token 5, below the
// slot's token 6) of the slot the prune in flight is closing, waits until
// it waits on a lock, lets prune commit, and returns the Check's answer.
func staleCheckBehindPrune(t *testing.T, b *bundle, g *pgfence.Guard, pool *pgxpool.Pool, isolation pgx.TxIsoLevel, resource, scope string, prune pgx.Tx) error {
	t.Helper()
	ctx := t.Context()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	pid := conn.Conn().PgConn().PID()
	done := make(chan error, 1)
	go func() {
		done <- pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{IsoLevel: isolation}, func(tx pgx.Tx) error {
			return g.Check(ctx, tx, resource, fence.Holder{Scope: scope, Token: 5, Owner: "stale"})
		})
	}()
	pgtest.WaitForLock(t, b.pool, pid, "the stale holder's Check waits behind the prune")
	require.NoError(t, prune.Commit(ctx))
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatal("the stale holder's Check did not return after the prune committed")
		return nil
	}
}

// A stale holder whose Check meets a prune of its slot in flight is
// refused: the Check waits on the watermark's lock and reads the raised
// watermark (READ COMMITTED), or fails with a serialization failure
// (REPEATABLE READ, SERIALIZABLE; retried, it is refused as closed). The
// control takes the lock out of the Check: it then reads the watermark
// from before the prune, waits on the guard row the prune deletes, and
// inserts the slot's fence anew with the stale token: accepted.
func TestSlotScopeCheckRacingAPruneIsRefused(t *testing.T) {
	t.Parallel()
	const unit = "settle|eu"
	slot := time.Date(2026, 3, 8, 1, 0, 0, 0, time.UTC).Unix()
	scope := fmt.Sprintf("%s@%d", unit, slot)
	for _, iso := range []pgx.TxIsoLevel{pgx.ReadCommitted, pgx.RepeatableRead, pgx.Serializable} {
		t.Run(string(iso), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			ctx := t.Context()
			const res = "race/charges"
			require.NoError(t, b.guard.CheckOwnTx(ctx, b.pool, res, fence.Holder{Scope: scope, Token: 6, Owner: "new"}))
			prune := pruneInFlight(t, b, res, unit, slot+1)
			err := staleCheckBehindPrune(t, b, b.guard, b.pool, iso, res, scope, prune)
			if iso == pgx.ReadCommitted {
				require.ErrorIs(t, err, fence.ErrScopeClosed)
			} else {
				require.ErrorIs(t, err, pgfence.ErrRetryable, "the watermark changed under the snapshot")
				err = pgx.BeginTxFunc(ctx, b.pool, pgx.TxOptions{IsoLevel: iso}, func(tx pgx.Tx) error {
					return b.guard.Check(ctx, tx, res, fence.Holder{Scope: scope, Token: 5, Owner: "stale"})
				})
				require.ErrorIs(t, err, fence.ErrScopeClosed, "run again, it is refused as closed")
			}
			var stale *fence.StaleTokenError
			require.ErrorAs(t, err, &stale)
			require.Equal(t, slot+1, stale.ClosedBefore.Unix())
			n := 0
			require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{b.schema, pgfence.DefaultTable}.Sanitize()+` WHERE resource = $1`, res).Scan(&n))
			require.Zero(t, n, "no guard row came back")
		})
	}
}

// A Check whose transaction took its snapshot before a prune of its slot
// committed (REPEATABLE READ: the snapshot of the transaction's first
// statement) fails with a serialization failure, and run again it is
// refused as closed. The control reads the watermark from its snapshot
// alone (the watermark row's statement and lock taken out): it sees no
// watermark and no guard row (the prune deleted it), and the stale token
// is accepted into a pruned slot.
func TestSlotScopeCheckWithASnapshotFromBeforeThePrune(t *testing.T) {
	t.Parallel()
	const unit, res = "settle|eu", "snap/charges"
	slot := time.Date(2026, 3, 8, 1, 0, 0, 0, time.UTC).Unix()
	scope := fmt.Sprintf("%s@%d", unit, slot)
	staleAfterPrune := func(t *testing.T, b *bundle, g *pgfence.Guard) error {
		ctx := t.Context()
		require.NoError(t, b.guard.CheckOwnTx(ctx, b.pool, res, fence.Holder{Scope: scope, Token: 6, Owner: "new"}))
		var accepted error
		err := pgx.BeginTxFunc(ctx, b.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT 1`); err != nil { // the snapshot
				return err
			}
			n, err := b.guard.PruneSlotScopes(ctx, b.pool, res, unit, time.Unix(slot+1, 0))
			require.NoError(t, err)
			require.Equal(t, 1, n)
			accepted = g.Check(ctx, tx, res, fence.Holder{Scope: scope, Token: 5, Owner: "stale"})
			return accepted
		})
		return err
	}
	t.Run("guard", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		err := staleAfterPrune(t, b, b.guard)
		require.ErrorIs(t, err, pgfence.ErrRetryable)
		err = pgx.BeginTxFunc(t.Context(), b.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead}, func(tx pgx.Tx) error {
			return b.guard.Check(t.Context(), tx, res, fence.Holder{Scope: scope, Token: 5, Owner: "stale"})
		})
		require.ErrorIs(t, err, fence.ErrScopeClosed)
	})
	t.Run("control/watermark read from the snapshot", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		unlocked, err := pgfence.WithoutWatermarkLock(pgfence.Options{Schema: b.schema})
		require.NoError(t, err)
		require.NoError(t, staleAfterPrune(t, b, unlocked), "the stale holder gets back in: what the protection prevents")
		var token int64
		require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT token FROM `+pgx.Identifier{b.schema, pgfence.DefaultTable}.Sanitize()+
			` WHERE resource = $1 AND scope = $2`, res, scope).Scan(&token))
		require.Equal(t, int64(5), token, "the stale token stands in a pruned slot's fence")
	})
}

// A prune that meets a slot-scoped Check still open waits
// PruneLockTimeout at most, fails as a lock timeout with nothing changed,
// and the unit's later Checks, which queue behind a waiting prune, go on.
// A pgx.Tx is refused: the prune is a transaction of its own.
func TestPruneGivesUpOnAnOpenCheck(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	const unit, res = "settle|eu", "convoy/charges"
	slot := int64(1780000000)
	// The unit's first Check creates its watermark row, which holds up the
	// unit's other first Checks until it commits: made here, committed.
	require.NoError(t, b.guard.CheckOwnTx(ctx, b.pool, res, fence.Holder{Scope: fmt.Sprintf("%s@%d", unit, slot-60), Token: 5, Owner: "z"}))
	open, err := b.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	require.NoError(t, err)
	t.Cleanup(func() { _ = open.Rollback(context.Background()) })
	require.NoError(t, b.guard.Check(ctx, open, res, fence.Holder{Scope: fmt.Sprintf("%s@%d", unit, slot), Token: 6, Owner: "a"}))

	_, err = b.guard.PruneSlotScopes(ctx, b.pool, res, unit, time.Unix(slot+1, 0))
	require.True(t, pgfence.IsLockTimeout(err), "%v", err)
	require.NoError(t, b.guard.CheckOwnTx(ctx, b.pool, res, fence.Holder{Scope: fmt.Sprintf("%s@%d", unit, slot+60), Token: 7, Owner: "b"}),
		"a later slot's Check is not held up once the prune gave up")
	require.NoError(t, open.Commit(ctx))
	n, err := b.guard.PruneSlotScopes(ctx, b.pool, res, unit, time.Unix(slot+1, 0))
	require.NoError(t, err)
	require.Equal(t, 2, n, "run again, it prunes")

	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := b.guard.PruneSlotScopes(ctx, tx, res, unit, time.Unix(slot+1, 0))
		return err
	})
	require.ErrorIs(t, err, pgfence.ErrInvalidOptions)
	err = pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		return b.guard.CheckOwnTx(ctx, tx, res, fence.Holder{Scope: unit, Token: 1, Owner: "c"})
	})
	require.ErrorIs(t, err, pgfence.ErrInvalidOptions)
}

// A cutoff later than the database's clock minus fence.PruneMargin is
// refused with a *fence.PruneCutoffError, through PruneSlotScopes and
// Pruner alike, and changes nothing: the closed table and the guard rows
// are as they were, a slot-scoped Check still open is not waited for
// (no lock is taken), and the slot just below the refused cutoff takes
// its holder's Check. An older cutoff prunes as before.
func TestPruneSlotScopesRefusesACutoffOfSlotsThatMayStillRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	const unit, res = "settle|eu", "recent/charges"
	now := time.Now()
	old := fence.Holder{Scope: fmt.Sprintf("%s@%d", unit, now.Add(-3*fence.PruneMargin).Unix()), Token: 5, Owner: "a"}
	recent := fence.Holder{Scope: fmt.Sprintf("%s@%d", unit, now.Add(-time.Second).Unix()), Token: 7, Owner: "b"}
	require.NoError(t, b.guard.CheckOwnTx(ctx, b.pool, res, old))
	require.NoError(t, b.guard.CheckOwnTx(ctx, b.pool, res, recent))
	guard := pgx.Identifier{b.schema, pgfence.DefaultTable}.Sanitize()
	closed := pgx.Identifier{b.schema, pgfence.DefaultTable + pgfence.ClosedTableSuffix}.Sanitize()
	rows := func() string {
		t.Helper()
		var out string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT coalesce((SELECT string_agg(format('%s %s %s %s', resource, unit, closed_before, updated_at), ';' ORDER BY unit) FROM `+closed+`), '')
			|| '|' || coalesce((SELECT string_agg(format('%s %s %s %s %s', resource, scope, token, owner, updated_at), ';' ORDER BY scope) FROM `+guard+`), '')`).Scan(&out))
		return out
	}
	before := rows()

	// A slot-scoped Check of the unit still open: a prune that took the
	// watermark's lock would wait for it (PruneLockTimeout).
	open, err := b.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	require.NoError(t, err)
	t.Cleanup(func() { _ = open.Rollback(context.Background()) })
	require.NoError(t, b.guard.Check(ctx, open, res, fence.Holder{Scope: fmt.Sprintf("%s@%d", unit, now.Unix()), Token: 9, Owner: "c"}))

	prunes := map[string]func(time.Time) (int, error){
		"PruneSlotScopes": func(c time.Time) (int, error) { return b.guard.PruneSlotScopes(ctx, b.pool, res, unit, c) },
		"Pruner":          func(c time.Time) (int, error) { return b.guard.Pruner(b.pool).PruneSlotScopes(ctx, res, unit, c) },
	}
	for name, prune := range prunes {
		for _, cutoff := range []time.Time{now.Add(time.Hour), now, now.Add(-fence.PruneMargin + time.Minute), time.Unix(1<<62, 0)} {
			n, err := prune(cutoff)
			require.False(t, pgfence.IsLockTimeout(err), "%s: no lock waited for", name)
			sinktest.RequirePruneCutoffRefused(t, err, n, res, cutoff, now, "the database's clock")
			require.Equal(t, before, rows(), "nothing changed")
		}
	}
	require.NoError(t, open.Rollback(ctx))
	require.NoError(t, b.guard.CheckOwnTx(ctx, b.pool, res, recent), "the slot below the refused cutoff is open")
	err = b.guard.CheckOwnTx(ctx, b.pool, res, fence.Holder{Scope: recent.Scope, Token: 6, Owner: "d"})
	require.ErrorIs(t, err, fence.ErrStaleToken)
	require.NotErrorIs(t, err, fence.ErrScopeClosed)

	cutoff := now.Add(-fence.PruneMargin - time.Minute)
	n, err := b.guard.PruneSlotScopes(ctx, b.pool, res, unit, cutoff)
	require.NoError(t, err, "a cutoff older than the limit")
	require.Equal(t, 1, n, "the old slot's guard row")
	var stale *fence.StaleTokenError
	require.ErrorAs(t, b.guard.CheckOwnTx(ctx, b.pool, res, old), &stale)
	require.Equal(t, cutoff.Unix(), stale.ClosedBefore.Unix())
	require.NoError(t, b.guard.CheckOwnTx(ctx, b.pool, res, recent))
}
