package pgledger

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// PruneBatch is how many job_runs rows one DELETE of Prune removes at
// most (1000): each batch is a transaction of its own, so a Prune of
// millions of rows never holds long locks nor one huge transaction.
const PruneBatch = 1000

var _ ledger.Pruner = (*Ledger)(nil)

// Prune implements ledger.Pruner: it deletes, in batches of PruneBatch,
// the job_runs rows (and, by ON DELETE CASCADE, their job_run_attempts)
// of slots before before that are done: succeeded, skipped, missed,
// abandoned, or failed with retry_at NULL. It keeps every row that is
// pending, running or failed with a retry, the row of each pair's
// job_fences.last_slot (State.Last), and every job_fences and job_pauses
// row: the horizon, the unit fences and the pause flags stay. Then it
// deletes the job_slot_fences rows (OverlapAllow) of the slots before
// their pair's cutoff whose record is gone: such a slot is closed, every
// token refused (docs/operations.md, "Retention"). A row a concurrent transition has locked is skipped
// (FOR UPDATE SKIP LOCKED), so Prune never waits on a claim; the next
// Prune takes it. It returns the rows deleted until ctx ended or an error
// came, with that error (wrapped, as every pgledger error). A cutoff later
// than the database's clock (now()) minus ledger.PruneMargin is refused
// first, in the cutoff's transaction, with a *ledger.PruneCutoffError
// returned as it is (not wrapped), and nothing changed.
func (l *Ledger) Prune(ctx context.Context, before time.Time) (deleted int64, err error) {
	if ctx == nil {
		return 0, nilContext("Prune")
	}
	const op = "prune"
	if err := l.use(ctx); err != nil {
		return 0, err
	}
	what := "slots before " + before.UTC().Format(time.RFC3339)
	// The cutoff first: no record is gone before State.Pruned says it
	// may be.
	if err := l.inTx(ctx, op, what, func(tx pgx.Tx) error {
		var now time.Time
		if err := tx.QueryRow(ctx, "SELECT now()").Scan(&now); err != nil {
			return wrapDBError(op, what, err)
		}
		if err := ledger.CheckPruneCutoff(before, now); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, l.sql.pruneCutoff, before); err != nil {
			return wrapDBError(op, what, err)
		}
		return nil
	}); err != nil {
		return 0, err
	}
	for {
		var n int64
		err := l.inTx(ctx, op, what, func(tx pgx.Tx) error {
			tag, err := tx.Exec(ctx, l.sql.prune, before, PruneBatch)
			if err != nil {
				return wrapDBError(op, what, err)
			}
			n = tag.RowsAffected()
			return nil
		})
		if err != nil {
			return deleted, err
		}
		deleted += n
		if n < PruneBatch {
			break
		}
	}
	// The slot fences of the slots gone (OverlapAllow): those slots are
	// closed now (raise refuses every token for them).
	return deleted, l.inTx(ctx, op, what, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, l.sql.pruneSlotFences); err != nil {
			return wrapDBError(op, what, err)
		}
		return nil
	})
}

var _ ledger.PrunePreviewer = (*Ledger)(nil)

// PrunePreview implements ledger.PrunePreviewer: one SELECT with Prune's
// predicate (no transaction, no lock), at most limit rows ordered by job,
// partition and slot, and the count of all. A row that a concurrent
// transition holds is listed, where Prune would skip it until its next run.
// It refuses a cutoff as Prune does.
func (l *Ledger) PrunePreview(ctx context.Context, before time.Time, limit int) ([]ledger.Slot, int64, error) {
	if ctx == nil {
		return nil, 0, nilContext("PrunePreview")
	}
	if err := l.use(ctx); err != nil {
		return nil, 0, err
	}
	var now time.Time
	if err := l.read(ctx, "prune_preview", "the database's clock", func() error {
		rows, err := l.db.Query(ctx, "SELECT now()")
		if err != nil {
			return err
		}
		now, err = pgx.CollectExactlyOneRow(rows, pgx.RowTo[time.Time])
		return err
	}); err != nil {
		return nil, 0, err
	}
	if err := ledger.CheckPruneCutoff(before, now); err != nil {
		return nil, 0, err
	}
	var out []ledger.Slot
	var total int64
	err := l.read(ctx, "prune_preview", "slots before "+before.UTC().Format(time.RFC3339), func() error {
		out, total = out[:0], 0
		rows, err := l.db.Query(ctx, l.sql.prunePreview, before, max(limit, 0))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var s ledger.Slot
			if err := rows.Scan(&s.Job, &s.At, &s.Partition, &total); err != nil {
				return err
			}
			s.At = s.At.UTC()
			out = append(out, s)
		}
		return rows.Err()
	})
	return out, total, err
}
