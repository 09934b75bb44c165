package pgledger

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/pgtx"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// State implements ledger.Ledger in one statement (one round trip) once
// the (job, partition) pair is known; the first State of a pair creates its
// fence row, which starts its horizon (now, the scheduler's clock,
// truncated to the second), and reads again.
//
// Open lists, oldest first, the slots at or after since that are pending,
// failed with a retry (RetryAt set), or running under a token below the
// pair's fence: their holder lost the lease to a holder that has since
// touched the ledger, so they are abandoned and the next Begin takes them
// over. A slot whose attempts Begin found spent is final and not listed.
func (l *Ledger) State(ctx context.Context, job, partition string, since, now time.Time) (ledger.State, error) {
	if ctx == nil {
		return ledger.State{}, nilContext("State")
	}
	const op = "state"
	if err := l.use(ctx); err != nil {
		return ledger.State{}, err
	}
	if err := validateKey(job, partition); err != nil {
		return ledger.State{}, err
	}
	st, known, err := l.state(ctx, job, partition, since)
	if err != nil || known {
		return st, err
	}
	if err := l.inTx(ctx, op, fenceResource(job, partition), func(tx pgx.Tx) error {
		return l.lockFence(ctx, tx, op, job, partition, nil, now)
	}); err != nil {
		return ledger.State{}, err
	}
	st, _, err = l.state(ctx, job, partition, since)
	return st, err
}

// state reads State; known is false when the pair has no fence row yet.
func (l *Ledger) state(ctx context.Context, job, partition string, since time.Time) (st ledger.State, known bool, err error) {
	const op = "state"
	err = l.read(ctx, op, fenceResource(job, partition), func() error {
		st, known = ledger.State{}, false
		rows, err := l.db.Query(ctx, l.sql.state, job, partition, since)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r stateRow
			if err := rows.Scan(&r.horizon, &r.last, &r.pruned, &st.Paused, &r.at, &r.status, &r.retryAt); err != nil {
				return err
			}
			known = r.add(&st)
		}
		return rows.Err()
	})
	return st, known, err
}

// stateRow is one row of the state and states statements.
type stateRow struct {
	horizon, last, pruned, at, retryAt *time.Time
	status                             *string
}

// add puts the row into st (its Paused scanned already) and reports
// whether the pair has a fence row.
func (r stateRow) add(st *ledger.State) (known bool) {
	st.Horizon, st.Last, st.Pruned = utc(r.horizon), utc(r.last), utc(r.pruned)
	if r.at == nil {
		return r.horizon != nil // the first row only, when nothing is open
	}
	open := ledger.OpenSlot{At: r.at.UTC()}
	if *r.status == string(ledger.StatusFailed) {
		open.RetryAt = utc(r.retryAt)
	}
	st.Open = append(st.Open, open)
	return r.horizon != nil
}

var _ ledger.StatesReader = (*Ledger)(nil)

// States implements ledger.StatesReader: the state statement of every
// request in one statement (one round trip); a pair the ledger does not
// know yet is then read with State, which creates its fence row and
// starts its horizon at now.
func (l *Ledger) States(ctx context.Context, reqs []ledger.StateRequest, now time.Time) ([]ledger.State, error) {
	if ctx == nil {
		return nil, nilContext("States")
	}
	if err := l.use(ctx); err != nil {
		return nil, err
	}
	if len(reqs) == 0 {
		return nil, nil
	}
	jobs, parts, sinces := make([]string, len(reqs)), make([]string, len(reqs)), make([]time.Time, len(reqs))
	for i, q := range reqs {
		if err := validateKey(q.Job, q.Partition); err != nil {
			return nil, err
		}
		jobs[i], parts[i], sinces[i] = q.Job, q.Partition, q.Since
	}
	out := make([]ledger.State, len(reqs))
	known := make([]bool, len(reqs))
	err := l.read(ctx, "state", fmt.Sprintf("%d pairs", len(reqs)), func() error {
		clear(out)
		clear(known)
		rows, err := l.db.Query(ctx, l.sql.states, jobs, parts, sinces)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				i      int64
				paused bool
				r      stateRow
			)
			if err := rows.Scan(&i, &r.horizon, &r.last, &r.pruned, &paused, &r.at, &r.status, &r.retryAt); err != nil {
				return err
			}
			if i < 1 || int(i) > len(reqs) {
				return fmt.Errorf("pgledger: states: row of pair %d of %d", i, len(reqs))
			}
			out[i-1].Paused = paused
			known[i-1] = r.add(&out[i-1])
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	for i, q := range reqs {
		if !known[i] {
			if out[i], err = l.State(ctx, q.Job, q.Partition, q.Since, now); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// Get implements ledger.Ledger.
func (l *Ledger) Get(ctx context.Context, slot ledger.Slot) (ledger.Record, bool, error) {
	if ctx == nil {
		return ledger.Record{}, false, nilContext("Get")
	}
	if err := l.use(ctx); err != nil {
		return ledger.Record{}, false, err
	}
	if err := validateKey(slot.Job, slot.Partition); err != nil {
		return ledger.Record{}, false, err
	}
	recs, err := l.records(ctx, "get", slotName(slot), l.sql.get, slot.Job, slotTime(slot.At), slot.Partition)
	if err != nil || len(recs) == 0 {
		return ledger.Record{}, false, err
	}
	return recs[0], true, nil
}

// List implements ledger.Ledger. limit must be at least 1.
func (l *Ledger) List(ctx context.Context, job, partition string, from, to time.Time, limit int) ([]ledger.Record, error) {
	if ctx == nil {
		return nil, nilContext("List")
	}
	if err := l.use(ctx); err != nil {
		return nil, err
	}
	if err := validateKey(job, partition); err != nil {
		return nil, err
	}
	if limit < 1 {
		return nil, fmt.Errorf("%w: limit %d, want at least 1", ErrInvalidArgument, limit)
	}
	return l.records(ctx, "list", fenceResource(job, partition), l.sql.list, job, partition, from, to, limit)
}

// records runs a records query and folds its rows, one per attempt (or one
// per run without attempts), into Records in the query's order.
func (l *Ledger) records(ctx context.Context, op, what, sql string, args ...any) ([]ledger.Record, error) {
	var recs []ledger.Record
	err := l.read(ctx, op, what, func() error {
		recs = recs[:0]
		rows, err := l.db.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		lastID := int64(-1)
		for rows.Next() {
			var (
				id                     int64
				rec                    ledger.Record
				status                 string
				retryAt                *time.Time
				n                      *int
				token                  *int64
				owner, holder, aStatus *string
				class, msg             *string
				started, hb, finished  *time.Time
			)
			if err := rows.Scan(&id, &rec.Slot.Job, &rec.Slot.At, &rec.Slot.Partition, &status, &rec.Attempt, &retryAt, &rec.Reason,
				&n, &token, &owner, &holder, &aStatus, &class, &msg, &started, &hb, &finished); err != nil {
				return err
			}
			if id != lastID {
				lastID = id
				rec.Slot.At = rec.Slot.At.UTC()
				rec.Status = ledger.Status(status)
				rec.RetryAt = utc(retryAt)
				recs = append(recs, rec)
			}
			if n == nil {
				continue // a run without attempts: skipped, missed, requested
			}
			cur := &recs[len(recs)-1]
			cur.Attempts = append(cur.Attempts, ledger.Attempt{
				N: *n, Token: fence.Token(*token), Owner: *owner, Holder: *holder,
				Status: ledger.Status(*aStatus), Class: ledger.ErrorClass(*class), Error: *msg,
				Started: utc(started), Heartbeat: utc(hb), Finished: utc(finished),
			})
		}
		return rows.Err()
	})
	return recs, err
}

// read runs fn, which reads with one statement (one snapshot, one round
// trip, no transaction), and wraps its error. A single read statement sees
// one snapshot at any isolation level; under SERIALIZABLE it may still
// fail with a serialization failure, and is then run again
// (pgtx.Retry: bounded, jittered, within ctx). fn must reset what it
// fills.
func (l *Ledger) read(ctx context.Context, op, what string, fn func() error) error {
	if err := pgtx.Retry(ctx, fn); err != nil {
		return wrapDBError(op, what, err)
	}
	return nil
}

// utc returns *t in UTC, or the zero time for nil.
func utc(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}
