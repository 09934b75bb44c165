package pgledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/ownerarg"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// run is a job_runs row as a transition reads it, locked.
type run struct {
	found     bool
	id        int64
	status    ledger.Status
	attempt   int
	base      int  // attempt_base: attempts before the last Request
	retryable bool // a failure with retry_at set
	owner     string
	token     int64
}

// lockRun reads the slot's run FOR UPDATE; found is false when there is
// none. Called after raise or lockFence, it waits for nobody: the pair's
// fence row lock (taken with per-slot fences too) already serialises the
// pair's writers.
func (l *Ledger) lockRun(ctx context.Context, tx pgx.Tx, op string, s ledger.Slot) (run, error) {
	var (
		r      run
		status string
	)
	err := tx.QueryRow(ctx, l.sql.runForUpdate, s.Job, slotTime(s.At), s.Partition).
		Scan(&r.id, &status, &r.attempt, &r.base, &r.retryable, &r.owner, &r.token)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return r, nil
	case err != nil:
		return r, wrapDBError(op, slotName(s), err)
	}
	r.found, r.status = true, ledger.Status(status)
	return r, nil
}

// Begin implements ledger.Ledger. In one transaction it raises the
// fence of f's scope (the (job, partition)'s or the slot's own), then,
// by the slot's state:
//
//   - no record, pending, failed with a retry, abandoned: starts the next
//     attempt when fewer than maxAttempts were made since the last Request;
//   - running under another owner: marks that attempt abandoned (class
//     interrupted, finished now), then as above;
//   - running under f.Owner: returns the running attempt (a Begin repeated
//     after a lost reply starts nothing);
//   - succeeded, skipped, missed, failed for good: ErrSlotDone.
//
// When the budget is spent, the slot is left final (a failure loses its
// retry, a taken-over running slot becomes abandoned) and Begin returns
// ErrSlotDone; the raised fence is committed either way. The slot becomes
// the pair's State.Last if it is the latest.
func (l *Ledger) Begin(ctx context.Context, slot ledger.Slot, f ledger.Fence, maxAttempts int, now time.Time) (attempt, left int, err error) {
	if ctx == nil {
		return 0, 0, nilContext("Begin")
	}
	const op = "begin"
	if err := l.use(ctx); err != nil {
		return 0, 0, err
	}
	if err := validateFenced(op, slot, f); err != nil {
		return 0, 0, err
	}
	if maxAttempts < 1 {
		return 0, 0, fmt.Errorf("%w: maxAttempts %d, want at least 1", ErrInvalidArgument, maxAttempts)
	}
	var (
		base int
		done bool
	)
	at := slotTime(slot.At)
	err = l.inTx(ctx, op, slotName(slot), func(tx pgx.Tx) error {
		attempt, base, done = 0, 0, false
		// Every Begin that gets past the fence leaves the slot begun now or
		// before: raising Last here is exact.
		if err := l.raise(ctx, tx, op, slot, f, &at, now); err != nil {
			return err
		}
		r, err := l.lockRun(ctx, tx, op, slot)
		if err != nil {
			return err
		}
		if !r.found {
			if err := tx.QueryRow(ctx, l.sql.insertRun, slot.Job, at, slot.Partition, ownerarg.Owner(f.Owner), int64(f.Token), now).Scan(&r.id); err != nil {
				return wrapDBError(op, slotName(slot), err)
			}
			attempt = 1
			return l.exec(ctx, tx, op, slot, l.sql.insertAtt, r.id, attempt, ownerarg.Owner(f.Owner), int64(f.Token), now, f.Holder)
		}
		switch r.status {
		case ledger.StatusSucceeded, ledger.StatusSkipped, ledger.StatusMissed:
			done = true
			return nil
		case ledger.StatusFailed:
			if !r.retryable {
				done = true
				return nil
			}
		case ledger.StatusRunning:
			if r.owner == f.Owner {
				attempt, base = r.attempt, r.base
				return nil
			}
			// Its holder lost the lease: the fence just accepted a newer one.
			lease := "job"
			if slotScoped, _ := f.Check(slot); slotScoped {
				lease = "slot's"
			}
			msg := fmt.Sprintf("abandoned: holder lost the %s lease (token %d, superseded by %d)", lease, r.token, f.Token)
			if err := l.exec(ctx, tx, op, slot, l.sql.abandonAtt, r.id, r.attempt, now, msg); err != nil {
				return err
			}
		}
		if r.attempt-r.base >= maxAttempts {
			// Spent: leave it final so State no longer lists it.
			final := r.status
			if final == ledger.StatusRunning {
				final = ledger.StatusAbandoned
			}
			done = true
			return l.exec(ctx, tx, op, slot, l.sql.exhaust, r.id, string(final), now)
		}
		base = r.base
		if err := tx.QueryRow(ctx, l.sql.startAttempt, r.id, ownerarg.Owner(f.Owner), int64(f.Token), now).Scan(&attempt); err != nil {
			return wrapDBError(op, slotName(slot), err)
		}
		return l.exec(ctx, tx, op, slot, l.sql.insertAtt, r.id, attempt, ownerarg.Owner(f.Owner), int64(f.Token), now, f.Holder)
	})
	switch {
	case err != nil:
		return 0, 0, err
	case done:
		return 0, 0, fmt.Errorf("pgledger: begin %s: %w", slotName(slot), ledger.ErrSlotDone)
	}
	return attempt, maxAttempts - (attempt - base), nil
}

// Heartbeat implements ledger.Ledger. Besides a stale fence, it returns a
// *fence.StaleTokenError when attempt is not the slot's running attempt of
// f.Owner: a newer attempt took the slot over.
func (l *Ledger) Heartbeat(ctx context.Context, slot ledger.Slot, f ledger.Fence, attempt int, now time.Time) error {
	if ctx == nil {
		return nilContext("Heartbeat")
	}
	const op = "heartbeat"
	if err := l.readyForAttempt(ctx, op, slot, f, attempt); err != nil {
		return err
	}
	return l.inTx(ctx, op, slotName(slot), func(tx pgx.Tx) error {
		if err := l.raise(ctx, tx, op, slot, f, nil, now); err != nil {
			return err
		}
		var n int
		err := tx.QueryRow(ctx, l.sql.heartbeat, slot.Job, slotTime(slot.At), slot.Partition, ownerarg.Owner(f.Owner), attempt, now).Scan(&n)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return l.notRunning(ctx, tx, op, slot, f, attempt, "")
		case err != nil:
			return wrapDBError(op, slotName(slot), err)
		}
		return nil
	})
}

// Finish implements ledger.Ledger. o.Status is StatusSucceeded or
// StatusFailed; a failure with a zero o.RetryAt is final. Error is stored
// cleaned (see MaxTextLen). Finish repeated with the same outcome after a
// lost reply returns nil; otherwise, when attempt is not the slot's running
// attempt of f.Owner, it returns a *fence.StaleTokenError.
func (l *Ledger) Finish(ctx context.Context, slot ledger.Slot, f ledger.Fence, attempt int, o ledger.Outcome, now time.Time) error {
	if ctx == nil {
		return nilContext("Finish")
	}
	const op = "finish"
	if err := l.readyForAttempt(ctx, op, slot, f, attempt); err != nil {
		return err
	}
	var retryAt *time.Time
	switch o.Status {
	case ledger.StatusSucceeded:
		o.Error, o.Class = "", ledger.ClassNone
	case ledger.StatusFailed:
		if !o.RetryAt.IsZero() {
			retryAt = &o.RetryAt
		}
	default:
		return fmt.Errorf("%w: outcome status %q, want %q or %q", ErrInvalidArgument, o.Status, ledger.StatusSucceeded, ledger.StatusFailed)
	}
	deferral := 0 // a deferral does not count against the budget
	if o.Status == ledger.StatusFailed && o.Class == ledger.ClassDeferred && retryAt != nil {
		deferral = 1
	}
	return l.inTx(ctx, op, slotName(slot), func(tx pgx.Tx) error {
		if err := l.raise(ctx, tx, op, slot, f, nil, now); err != nil {
			return err
		}
		var n int
		err := tx.QueryRow(ctx, l.sql.finish, slot.Job, slotTime(slot.At), slot.Partition, ownerarg.Owner(f.Owner), attempt, now,
			string(o.Status), cleanText(string(o.Class)), cleanText(o.Error), retryAt, deferral).Scan(&n)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return l.notRunning(ctx, tx, op, slot, f, attempt, o.Status)
		case err != nil:
			return wrapDBError(op, slotName(slot), err)
		}
		return nil
	})
}

// notRunning explains why attempt of slot could not be heartbeated or
// finished although the fence accepted f: nil when it is this owner's
// latest attempt and already ended with repeat (a repeated Finish), a
// *fence.StaleTokenError otherwise, with Current the token of the slot's
// latest transition.
func (l *Ledger) notRunning(ctx context.Context, tx pgx.Tx, op string, slot ledger.Slot, f ledger.Fence, attempt int, repeat ledger.Status) error {
	var (
		runStatus, attOwner, attStatus string
		runAttempt                     int
		runToken, attToken             int64
	)
	err := tx.QueryRow(ctx, l.sql.attemptOf, slot.Job, slotTime(slot.At), slot.Partition, attempt).
		Scan(&runStatus, &runAttempt, &runToken, &attOwner, &attToken, &attStatus)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		runToken = int64(f.Token)
	case err != nil:
		return wrapDBError(op, slotName(slot), err)
	case repeat != "" && runAttempt == attempt && runStatus == string(repeat) &&
		attStatus == string(repeat) && attOwner == f.Owner && attToken == int64(f.Token):
		return nil
	}
	// The owner is a write capability: the error, which goes to logs,
	// names its id.
	return fmt.Errorf("pgledger: %s %s: attempt %d is not running under owner id %s: %w", op, slotName(slot), attempt, fence.OwnerID(f.Owner),
		&fence.StaleTokenError{Resource: slotName(slot), Presented: f.Token, Current: fence.Token(runToken)})
}

// Skip implements ledger.Ledger: it records status (StatusSkipped or
// StatusMissed) and reason for a slot with no record, and makes it the
// pair's State.Last if it is the latest. A slot with a record (begun,
// skipped, missed or requested) is left as it is, and Skip returns nil.
func (l *Ledger) Skip(ctx context.Context, slot ledger.Slot, f ledger.Fence, status ledger.Status, reason string, now time.Time) error {
	if ctx == nil {
		return nilContext("Skip")
	}
	const op = "skip"
	if err := l.use(ctx); err != nil {
		return err
	}
	if err := validateFenced(op, slot, f); err != nil {
		return err
	}
	if status != ledger.StatusSkipped && status != ledger.StatusMissed {
		return fmt.Errorf("%w: skip status %q, want %q or %q", ErrInvalidArgument, status, ledger.StatusSkipped, ledger.StatusMissed)
	}
	at := slotTime(slot.At)
	return l.inTx(ctx, op, slotName(slot), func(tx pgx.Tx) error {
		if err := l.raise(ctx, tx, op, slot, f, nil, now); err != nil {
			return err
		}
		var id int64
		err := tx.QueryRow(ctx, l.sql.insertSkip, slot.Job, at, slot.Partition, string(status), cleanText(reason),
			ownerarg.Owner(f.Owner), int64(f.Token), now).Scan(&id)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			return nil // it has a record: left as it is
		case err != nil:
			return wrapDBError(op, slotName(slot), err)
		}
		return l.exec(ctx, tx, op, slot, l.sql.raiseLast, slot.Job, slot.Partition, at)
	})
}

// Request implements ledger.Ledger. It is not fenced, but takes the
// (job, partition) fence row's lock like every transition, so it never
// interleaves with one. A slot without a record gets one (a backfill or a
// trigger); it does not become State.Last, which only begun, skipped and
// missed slots do.
func (l *Ledger) Request(ctx context.Context, slot ledger.Slot, reason string, now time.Time) error {
	if ctx == nil {
		return nilContext("Request")
	}
	const op = "request"
	if err := l.use(ctx); err != nil {
		return err
	}
	if err := validateKey(slot.Job, slot.Partition); err != nil {
		return err
	}
	at := slotTime(slot.At)
	reason = cleanText(reason)
	running := false
	err := l.inTx(ctx, op, slotName(slot), func(tx pgx.Tx) error {
		running = false
		if err := l.lockFence(ctx, tx, op, slot.Job, slot.Partition, nil, now); err != nil {
			return err
		}
		r, err := l.lockRun(ctx, tx, op, slot)
		switch {
		case err != nil:
			return err
		case !r.found:
			return l.exec(ctx, tx, op, slot, l.sql.insertReq, slot.Job, at, slot.Partition, reason, now)
		case r.status == ledger.StatusRunning:
			running = true
			return nil
		}
		return l.exec(ctx, tx, op, slot, l.sql.request, r.id, reason, now)
	})
	switch {
	case err != nil:
		return err
	case running:
		return fmt.Errorf("pgledger: request %s: %w", slotName(slot), ledger.ErrSlotRunning)
	}
	return nil
}

// lockFence creates the pair's fence row if missing (which starts its
// horizon at now, truncated to the second) and locks it until tx ends, without checking or raising its
// token: ensureFence's ON CONFLICT DO UPDATE takes the row lock, after
// waiting for a writer. last, when not nil, raises the pair's latest slot.
func (l *Ledger) lockFence(ctx context.Context, tx pgx.Tx, op, job, partition string, last *time.Time, now time.Time) error {
	var horizon time.Time
	if err := tx.QueryRow(ctx, l.sql.ensureFence, job, partition, last, now).Scan(&horizon); err != nil {
		return wrapDBError(op, fenceResource(job, partition), err)
	}
	return nil
}

// SetPaused implements ledger.Ledger: the flag is per job, for every
// partition. It is not fenced.
func (l *Ledger) SetPaused(ctx context.Context, job string, paused bool) error {
	if ctx == nil {
		return nilContext("SetPaused")
	}
	const op = "set paused"
	if err := l.use(ctx); err != nil {
		return err
	}
	if err := validateKey(job, ""); err != nil {
		return err
	}
	return l.inTx(ctx, op, job, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, l.sql.setPaused, job, paused); err != nil {
			return wrapDBError(op, job, err)
		}
		return nil
	})
}

// Paused implements ledger.PauseReader: one read, no transaction.
func (l *Ledger) Paused(ctx context.Context, job string) (bool, error) {
	if ctx == nil {
		return false, nilContext("Paused")
	}
	if err := l.use(ctx); err != nil {
		return false, err
	}
	if err := validateKey(job, ""); err != nil {
		return false, err
	}
	var paused bool
	err := l.read(ctx, "paused", job, func() error {
		rows, err := l.db.Query(ctx, l.sql.paused, job)
		if err != nil {
			return err
		}
		paused, err = pgx.CollectExactlyOneRow(rows, pgx.RowTo[bool])
		return err
	})
	return paused, err
}

// exec runs one statement of a transition.
func (l *Ledger) exec(ctx context.Context, tx pgx.Tx, op string, slot ledger.Slot, sql string, args ...any) error {
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		return wrapDBError(op, slotName(slot), err)
	}
	return nil
}

// readyForAttempt refuses a Ledger not made by New, and a bad slot, fence
// or attempt number (below 1) of Heartbeat and Finish.
func (l *Ledger) readyForAttempt(ctx context.Context, op string, slot ledger.Slot, f ledger.Fence, attempt int) error {
	if err := l.ready(); err != nil {
		return err
	}
	if err := validateFenced(op, slot, f); err != nil {
		return err
	}
	if attempt < 1 {
		return fmt.Errorf("%w: attempt %d, want at least 1", ErrInvalidArgument, attempt)
	}
	return l.use(ctx)
}
