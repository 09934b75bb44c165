package pgfence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/internal/fencerule"
	"github.com/holdfast-go/holdfast/internal/ownerarg"
	"github.com/holdfast-go/holdfast/internal/pgtx"
	"github.com/holdfast-go/holdfast/internal/prunecutoff"
	"github.com/holdfast-go/holdfast/internal/safe"
)

// ClosedTableSuffix names the table of closed slot scopes: "<table>" +
// ClosedTableSuffix, beside the guard table (Migrate creates it). A
// Table name may therefore be at most 63-len(ClosedTableSuffix) bytes.
const ClosedTableSuffix = "_closed"

// slotSQL holds the statements of slot-scoped checks and of
// PruneSlotScopes, built once by New.
type slotSQL struct {
	// ensure creates the (resource, unit) row of the closed table when it
	// is missing ($1 resource, $2 unit). A statement of its own before
	// check, so that check's snapshot, taken after it, sees the row
	// whoever created it.
	ensure string
	// check locks the (resource, unit) row FOR SHARE and applies the rule
	// unless the slot is below its watermark. $1 resource, $2 scope, $3
	// token, $4 owner, $5 unit, $6 slot (unix seconds). It returns the
	// watermark (NULL: none) and whether the guard row was raised.
	check string
	// raise takes the (resource, unit) row FOR UPDATE and raises its
	// watermark ($1 resource, $2 unit, $3 before's unix seconds) if the
	// cutoff passes ($4 before, a timestamptz; $5 the margin,
	// microseconds: prunecutoff.SQL), and returns now() and whether it
	// passed; deleteBelow then deletes the guard rows of unit's slot
	// scopes below the watermark ($1 resource, $2 unit; the row raise
	// locked), under the same condition ($3 before, $4 the margin: now()
	// is the transaction's, the same in both), and counts them.
	raise, deleteBelow string
}

func newSlotSQL(guard, closed string) slotSQL {
	up := fencerule.Upsert{
		Table:     guard,
		Columns:   "resource, scope, token, owner, updated_at",
		Values:    "$1, $2, $3, $4, now()",
		Conflict:  "resource, scope",
		Set:       "updated_at = now()",
		Returning: "f.token",
		When:      "NOT EXISTS (SELECT 1 FROM w WHERE w.closed_before > $6)",
	}.SQL()
	return slotSQL{
		ensure: `INSERT INTO ` + closed + ` (resource, unit) VALUES ($1, $2) ON CONFLICT (resource, unit) DO NOTHING`,
		// Under READ COMMITTED the FOR SHARE lock waits for a
		// PruneSlotScopes in progress and reads the watermark it commits;
		// under REPEATABLE READ or SERIALIZABLE a watermark raised after
		// the transaction's snapshot fails the lock with a serialization
		// failure (ErrRetryable). The guard row is written by the same
		// statement, after the lock.
		check: `WITH w AS (SELECT closed_before FROM ` + closed + ` WHERE resource = $1 AND unit = $5 FOR SHARE),
up AS (` + up + `)
SELECT (SELECT closed_before FROM w), EXISTS (SELECT 1 FROM up)`,
		raise: `WITH raised AS (
  INSERT INTO ` + closed + ` AS c (resource, unit, closed_before)
  SELECT $1, $2, $3 WHERE ` + prunecutoff.SQL("$4", "$5") + `
  ON CONFLICT (resource, unit) DO UPDATE
     SET closed_before = GREATEST(c.closed_before, EXCLUDED.closed_before), updated_at = now()
  RETURNING 1)
SELECT now(), EXISTS (SELECT 1 FROM raised)`,
		// The same parse as fence.SplitSlotScope: scope is unit, '@' and a
		// canonical decimal of at most 15 digits.
		deleteBelow: `WITH gone AS (
  DELETE FROM ` + guard + `
   WHERE resource = $1
     AND starts_with(scope, $2 || '@')
     AND substr(scope, length($2) + 2) ~ '^(0|-?[1-9][0-9]{0,` + strconv.Itoa(fence.MaxSlotDigits-1) + `})$'
     AND substr(scope, length($2) + 2)::bigint <
         (SELECT closed_before FROM ` + closed + ` WHERE resource = $1 AND unit = $2)
     AND ` + prunecutoff.SQL("$3", "$4") + `
  RETURNING 1)
SELECT count(*) FROM gone`,
	}
}

// checkSlot is Check for a slot scope (fence.SplitSlotScope) of unit at
// slot: in db's transaction, the (resource, unit) row of the closed table
// is made to exist, locked FOR SHARE, and a slot below its watermark is
// refused with fence.ClosedScopeError; otherwise the rule runs as for any
// scope. Two statements, pipelined when db can (a pgx.Tx can).
func (g *Guard) checkSlot(ctx context.Context, db DBTX, resource string, h fence.Holder, unit string, slot int64) error {
	var (
		closed   *int64
		accepted bool
	)
	args := []any{resource, h.Scope, int64(h.Token), ownerarg.Owner(h.Owner), unit, slot}
	if b, ok := db.(interface {
		SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
	}); ok {
		batch := &pgx.Batch{}
		batch.Queue(g.slot.ensure, resource, unit)
		batch.Queue(g.slot.check, args...).QueryRow(func(row pgx.Row) error { return row.Scan(&closed, &accepted) })
		if err := b.SendBatch(ctx, batch).Close(); err != nil {
			return wrapDBError("check", resource, err)
		}
	} else {
		if _, err := db.Exec(ctx, g.slot.ensure, resource, unit); err != nil {
			return wrapDBError("check", resource, err)
		}
		if err := db.QueryRow(ctx, g.slot.check, args...).Scan(&closed, &accepted); err != nil {
			return wrapDBError("check", resource, err)
		}
	}
	return g.slotOutcome(ctx, db, resource, h, closed, accepted, slot)
}

// slotOutcome turns a slot-scoped check's answer into Check's: nil, a
// closed scope's error, or the rule's refusal (the guard row read in db,
// where the refused upsert left it locked).
func (g *Guard) slotOutcome(ctx context.Context, db DBTX, resource string, h fence.Holder, closed *int64, accepted bool, slot int64) error {
	switch {
	case closed != nil && slot < *closed:
		return fence.ClosedScopeError(resource, h, *closed)
	case accepted:
		return nil
	}
	current, _, err := g.current(ctx, db, resource, h.Scope)
	if err != nil {
		return err
	}
	return &fence.StaleTokenError{Resource: resource, Scope: h.Scope, Presented: h.Token, Current: current}
}

// PruneSlotScopes is fence.SlotScopePruner's method on the guard table
// (with the database to work through; httpfence's pgstore.Fence, which
// holds one, implements the interface): in
// a READ COMMITTED transaction of its own on db (a pool or a connection,
// not a pgx.Tx), it raises the watermark of (resource, unit) in the closed
// table to before (unix seconds, truncated; never lowered), which waits
// for every slot-scoped Check of (resource, unit) in progress to end, and
// then deletes the guard rows of unit's slot scopes (fence.SplitSlotScope)
// below the watermark. It returns how many rows it deleted. From then on
// Check refuses a slot scope of unit below the watermark with a
// *fence.StaleTokenError matching fence.ErrScopeClosed, whatever its token.
// While it waits for an open Check, new Checks of (resource, unit), of
// any slot, queue behind it: it waits PruneLockTimeout at most, then fails
// (IsLockTimeout) with nothing changed. Keep the writers' transactions
// short, and prune where a short stall of the unit's writers is fine.
//
// before must be a cutoff in the past (the ledger's): a watermark never
// goes down. A before later than the database's clock (now(), in the
// prune's own transaction) minus fence.PruneMargin (1 hour) is refused,
// with nothing changed (no watermark raised, no row deleted, no lock
// waited for): a cutoff in the future would close the slot scopes of runs
// still going, for good. The error wraps a *fence.PruneCutoffError naming
// the cutoff, the limit and the database's clock (errors.As), and matches
// fence.ErrPruneCutoff (errors.Is). The caller's clock plays no part;
// before is compared at the microsecond (timestamptz).
//
// Errors: ErrInvalidResource, ErrInvalidScope (an empty or invalid unit, or
// one holding no slot scope: longer than MaxScopeLen-2), ErrInvalidOptions
// (nil db or ctx, a pgx.Tx, or a connection inside a transaction begun by
// hand: the prune is a transaction of its own, whose COMMIT would commit
// yours), a
// refused cutoff (fence.ErrPruneCutoff), a lock timeout (IsLockTimeout), or
// the database's, wrapped. A serialization failure or deadlock is retried
// as in CheckOwnTx.
func (g *Guard) PruneSlotScopes(ctx context.Context, db Batcher, resource, unit string, before time.Time) (int, error) {
	if err := g.ready(); err != nil {
		return 0, err
	}
	if err := validateResource(resource); err != nil {
		return 0, err
	}
	if err := validateUnit(unit); err != nil {
		return 0, err
	}
	if safe.IsNil(db) {
		return 0, fmt.Errorf("%w: prune slot scopes of %q: nil database", ErrInvalidOptions, resource)
	}
	if ctx == nil {
		return 0, fmt.Errorf("%w: prune slot scopes of %q: %w", ErrInvalidOptions, resource, errfamily.ErrNilContext)
	}
	if err := g.CheckFormat(ctx, db); err != nil {
		return 0, err
	}
	if pgtx.InTransaction(db) {
		return 0, fmt.Errorf("%w: prune slot scopes of %q: a pgx.Tx, or a connection inside a transaction; PruneSlotScopes runs a transaction of its own: give it a pool or a connection outside one", ErrInvalidOptions, resource)
	}
	var (
		deleted int64
		now     time.Time
		passed  bool
	)
	cutoff, margin := prunecutoff.SQLCutoff(before), fence.PruneMargin.Microseconds()
	err := pgtx.Batch(ctx, db, func(b *pgx.Batch) {
		deleted = 0
		// A prune waiting for a Check holds up every new Check of the
		// (resource, unit), its later slots' too (Postgres queues them
		// behind the prune's lock): it waits PruneLockTimeout at most, then
		// fails and is run again later.
		b.Queue(pruneLockTimeoutSQL)
		// The cutoff is checked against the database's clock in the
		// statements themselves: a refused one raises, locks and deletes
		// nothing.
		b.Queue(g.slot.raise, resource, unit, before.Unix(), cutoff, margin).QueryRow(func(row pgx.Row) error { return row.Scan(&now, &passed) })
		// A statement of its own, so its snapshot is taken once raise
		// holds the row: every Check that passed the old watermark has
		// committed (or rolled back) by then, and its guard row is seen.
		b.Queue(g.slot.deleteBelow, resource, unit, cutoff, margin).QueryRow(func(row pgx.Row) error { return row.Scan(&deleted) })
	})
	if err != nil {
		return 0, wrapDBError("prune slot scopes of", resource, err)
	}
	if !passed {
		return 0, fmt.Errorf("pgfence: prune slot scopes of %q: %w", resource,
			&fence.PruneCutoffError{Before: before, Limit: now.Add(-fence.PruneMargin), Now: now, Margin: fence.PruneMargin})
	}
	return int(deleted), nil
}

// PruneLockTimeout bounds how long PruneSlotScopes waits for the
// slot-scoped Checks of the (resource, unit) still open (their
// transactions): 500 ms. Past it the prune fails with SQLSTATE 55P03
// (lock_not_available; IsLockTimeout) and changes nothing; run it again
// later (the scheduler's prune does, at its next tick).
const PruneLockTimeout = 500 * time.Millisecond

var pruneLockTimeoutSQL = fmt.Sprintf("SET LOCAL lock_timeout = '%dms'", PruneLockTimeout.Milliseconds())

// IsLockTimeout reports whether err is a lock timeout (SQLSTATE 55P03):
// PruneSlotScopes gave up waiting for open Checks (PruneLockTimeout).
func IsLockTimeout(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "55P03"
}

// validateUnit checks a unit of slot scopes: what validateScope accepts,
// not empty, with room for "@" and a slot.
func validateUnit(unit string) error {
	if unit == "" {
		return fmt.Errorf("%w: empty unit", ErrInvalidScope)
	}
	if len(unit) > MaxScopeLen-2 {
		return fmt.Errorf("%w: unit of %d bytes, limit %d", ErrInvalidScope, len(unit), MaxScopeLen-2)
	}
	return validateScope(unit)
}

// Pruner returns g's PruneSlotScopes through db as a fence.SlotScopePruner
// (for scheduler.Job.SlotScopeSinks): it refuses a cutoff later than the
// database's clock minus fence.PruneMargin as PruneSlotScopes does
// (fence.ErrPruneCutoff, nothing changed).
func (g *Guard) Pruner(db Batcher) fence.SlotScopePruner { return guardPruner{g, db} }

type guardPruner struct {
	g  *Guard
	db Batcher
}

func (p guardPruner) PruneSlotScopes(ctx context.Context, resource, unit string, before time.Time) (int, error) {
	return p.g.PruneSlotScopes(ctx, p.db, resource, unit, before)
}
