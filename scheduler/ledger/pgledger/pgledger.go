package pgledger

import (
	"context"
	"errors"
	"fmt"
	"github.com/holdfast-go/holdfast/internal/formatver"
	"github.com/holdfast-go/holdfast/internal/ownerarg"
	"github.com/holdfast-go/holdfast/internal/pgtx"
	"math"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/safe"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// DefaultSchema holds the ledger's tables when Options.Schema is "". It is
// pgfence's default too: both stores can share one schema.
const DefaultSchema = "holdfast"

// Limits on what the ledger stores, in bytes.
const (
	// MaxTextLen bounds an error message or a reason (4096). Longer text is
	// cut, not refused: a job's error must not make its Finish fail.
	MaxTextLen = 4096
)

// rollbackTimeout bounds the rollback of a transaction whose context ended.
const rollbackTimeout = 5 * time.Second

// DB is what the ledger needs from a database: every transition runs in a
// transaction of its own, every read is one statement. *pgxpool.Pool and
// *pgx.Conn satisfy it; use a pool, as a *pgx.Conn is not safe for
// concurrent use. A pgx.Tx does not: the ledger commits its own writes.
type DB interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Options names where the ledger lives. The zero Options is valid.
type Options struct {
	// Schema holds the tables job_fences, job_slot_fences, job_runs,
	// job_run_attempts and job_pauses; Migrate creates them. A lower-case SQL identifier.
	// Default DefaultSchema ("holdfast").
	Schema string
}

// identifierRE is the form accepted for Schema: what Postgres accepts
// unquoted, lower case only (as pgfence). 63 bytes is NAMEDATALEN-1.
var identifierRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

func (c Options) withDefaults() Options {
	if c.Schema == "" {
		c.Schema = DefaultSchema
	}
	return c
}

func (c Options) validate() error {
	if !identifierRE.MatchString(c.Schema) {
		return fmt.Errorf("%w: Schema %q: want a lower-case SQL identifier matching %s", ErrInvalidOptions, c.Schema, identifierRE)
	}
	return nil
}

// Ledger is a ledger.Ledger in PostgreSQL. It holds no goroutine and is
// safe for concurrent use; see the package documentation for the model.
type Ledger struct {
	db     DB
	schema string
	sql    queries
	format formatver.Gate // the stored format, checked on first use
}

// store names the package in format markers and errors.
const store = "scheduler/ledger/pgledger"

var _ ledger.Ledger = (*Ledger)(nil)

// New returns a Ledger over db with its tables in cfg.Schema. It returns an
// error matching ErrInvalidOptions for a nil db (a nil *pgxpool.Pool too)
// or an invalid schema name. New does not touch the database: run Migrate
// once before the first call. Keys are bounded as the scheduler bounds
// them: job names by ledger.MaxJobNameLen, partitions by
// ledger.MaxPartitionLen (one limit for every store).
func New(db DB, cfg Options) (*Ledger, error) {
	if safe.IsNil(db) {
		return nil, fmt.Errorf("%w: nil DB", ErrInvalidOptions)
	}
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Ledger{db: db, schema: cfg.Schema, sql: newQueries(cfg.Schema)}, nil
}

// ready reports ErrNotCreated for a nil Ledger or one not made by New.
func (l *Ledger) ready() error {
	if l == nil || l.db == nil {
		return ErrNotCreated
	}
	return nil
}

// use is ready, then the stored format check of the first use: the
// comment of job_runs must be this build's marker (docs/compatibility.md),
// or the call fails with a *fence.FormatError.
func (l *Ledger) use(ctx context.Context) error {
	if err := l.ready(); err != nil {
		return err
	}
	return l.format.Check(ctx, l.checkFormat)
}

func (l *Ledger) checkFormat(ctx context.Context) error {
	table := pgx.Identifier{l.schema, "job_runs"}.Sanitize()
	var found *string
	err := pgtx.Retry(ctx, func() error {
		rows, err := l.db.Query(ctx, formatver.CommentSQL, table)
		if err != nil {
			return err
		}
		found = nil
		_, err = pgx.ForEachRow(rows, []any{&found}, func() error { return nil })
		return err
	})
	if err != nil {
		return wrapDBError("format", table, err)
	}
	return formatver.CheckComment(store, table, found)
}

// inTx runs fn in a READ COMMITTED transaction and commits it when fn
// returns nil. fn wraps its own errors; inTx wraps those of BEGIN and
// COMMIT. The rollback of a failed transaction outlives ctx (bounded by
// rollbackTimeout), so a canceled call leaves a usable connection.
func (l *Ledger) inTx(ctx context.Context, op, what string, fn func(pgx.Tx) error) error {
	if _, isTx := l.db.(pgx.Tx); !isTx && pgtx.InTransaction(l.db) {
		// A connection in a transaction begun by hand: BEGIN would only
		// warn, and COMMIT would commit the caller's transaction.
		return fmt.Errorf("%w: %s %s: %w", ErrInvalidOptions, op, what, pgtx.ErrInTransaction)
	}
	tx, err := l.db.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return wrapDBError(op, what, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_ = tx.Rollback(rctx) // after Commit: pgx.ErrTxClosed, ignored
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return wrapDBError(op, what, err)
	}
	return nil
}

// raise applies the acceptance rule inside tx to the fence f is checked
// against and raises it, taking the (job, partition) fence row's lock until
// tx ends either way, so every later statement of tx sees what the previous
// writer of the pair committed and no other transition of the pair runs
// meanwhile. last, when not nil, raises the pair's latest slot in the same
// statement. It returns a *fence.StaleTokenError carrying the current token
// when the rule refuses.
//
// The fence is the one of f's scope (ledger.Fence.Check): the pair's
// (job_fences) for the unit scope, the slot's own (job_slot_fences) for its
// slot scope; then the pair's row is locked (and created, starting the
// horizon, if missing) but its token checked and raised only for
// f.Planner. The tables are those of the stored format before fences were
// named by scope.
// now, the caller's clock, starts the pair's horizon when its row is
// created: the database's clock never enters raise's decision (Prune's
// cutoff check alone reads it).
func (l *Ledger) raise(ctx context.Context, tx pgx.Tx, op string, slot ledger.Slot, f ledger.Fence, last *time.Time, now time.Time) error {
	slotScoped, err := f.Check(slot)
	if err != nil {
		return fmt.Errorf("pgledger: %s %s: %w", op, slotName(slot), err)
	}
	if slotScoped {
		if u := f.Planner; u != nil {
			// The planner's fence: checked and raised on the pair's row.
			err = l.check(ctx, tx, op, fenceResource(slot.Job, slot.Partition), *u,
				l.sql.raise, []any{slot.Job, slot.Partition, int64(u.Token), ownerarg.Owner(u.Owner), last, now},
				l.sql.fenceToken, []any{slot.Job, slot.Partition})
		} else {
			err = l.lockFence(ctx, tx, op, slot.Job, slot.Partition, last, now)
		}
		if err != nil {
			return err
		}
		at := slotTime(slot.At)
		// The pair's row is locked: a Prune deleting slot fences waits.
		var closed bool
		if err := tx.QueryRow(ctx, l.sql.slotClosed, slot.Job, slot.Partition, at).Scan(&closed); err != nil {
			return wrapDBError(op, slotFenceResource(slot), err)
		}
		if closed {
			return fmt.Errorf("pgledger: %s: %w", op, &fence.StaleTokenError{
				Resource: slotFenceResource(slot), Scope: f.Scope, Presented: f.Token,
			})
		}
		return l.check(ctx, tx, op, slotFenceResource(slot), f,
			l.sql.raiseSlot, []any{slot.Job, slot.Partition, at, int64(f.Token), ownerarg.Owner(f.Owner)},
			l.sql.slotFenceToken, []any{slot.Job, slot.Partition, at})
	}
	return l.check(ctx, tx, op, fenceResource(slot.Job, slot.Partition), f,
		l.sql.raise, []any{slot.Job, slot.Partition, int64(f.Token), ownerarg.Owner(f.Owner), last, now},
		l.sql.fenceToken, []any{slot.Job, slot.Partition})
}

// check runs raiseSQL, one upsert that applies the acceptance rule to a
// fence row and raises it, returning a row iff the rule accepts. When it
// refuses, ON CONFLICT has locked the row even so: tokenSQL then reads the
// token that refused the write, for the *fence.StaleTokenError naming
// resource.
func (l *Ledger) check(ctx context.Context, tx pgx.Tx, op, resource string, f ledger.Fence,
	raiseSQL string, raiseArgs []any, tokenSQL string, tokenArgs []any,
) error {
	var raised int64
	err := tx.QueryRow(ctx, raiseSQL, raiseArgs...).Scan(&raised)
	switch {
	case err == nil:
		return nil
	case !errors.Is(err, pgx.ErrNoRows):
		return wrapDBError(op, resource, err)
	}
	var current int64
	if err := tx.QueryRow(ctx, tokenSQL, tokenArgs...).Scan(&current); err != nil {
		return wrapDBError(op, resource, err)
	}
	return fmt.Errorf("pgledger: %s: %w", op, &fence.StaleTokenError{
		Resource: resource, Scope: f.Scope, Presented: f.Token, Current: fence.Token(current),
	})
}

// fenceResource names a (job, partition) fence in errors.
func fenceResource(job, partition string) string {
	return "job_fences(" + job + ", " + partition + ")"
}

// slotFenceResource names a slot's own fence (its slot scope) in errors.
func slotFenceResource(s ledger.Slot) string {
	return "job_slot_fences(" + s.Job + ", " + s.Partition + ", " + slotTime(s.At).Format(time.RFC3339) + ")"
}

// slotName names a slot in errors.
func slotName(s ledger.Slot) string { return s.Key() }

// slotTime is the stored form of a slot's instant: UTC, whole seconds (a
// Slot's identity has second precision, as in the Redis ledger).
func slotTime(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// validateKey checks a (job, partition) pair.
func validateKey(job, partition string) error {
	switch {
	case job == "":
		return fmt.Errorf("%w: empty job name", ErrInvalidArgument)
	case len(job) > ledger.MaxJobNameLen:
		return fmt.Errorf("%w: job name of %d bytes, limit %d", ErrInvalidArgument, len(job), ledger.MaxJobNameLen)
	case !validText(job):
		return fmt.Errorf("%w: job name %q: not valid UTF-8 or holds a NUL byte", ErrInvalidArgument, job)
	case len(partition) > ledger.MaxPartitionLen:
		return fmt.Errorf("%w: partition of %d bytes, limit %d", ErrInvalidArgument, len(partition), ledger.MaxPartitionLen)
	case !validText(partition):
		return fmt.Errorf("%w: partition %q: not valid UTF-8 or holds a NUL byte", ErrInvalidArgument, partition)
	}
	return nil
}

// validateFenced checks what every fenced transition presents.
func validateFenced(op string, s ledger.Slot, f ledger.Fence) error {
	if err := validateKey(s.Job, s.Partition); err != nil {
		return err
	}
	switch {
	case f.Token == fence.None:
		return fmt.Errorf("pgledger: %s %s: %w", op, slotName(s), fence.ErrNoToken)
	case uint64(f.Token) > math.MaxInt64:
		return fmt.Errorf("%w: token %d exceeds the bigint maximum", ErrInvalidArgument, f.Token)
	case f.Owner == "":
		return fmt.Errorf("%w: empty owner", ErrInvalidArgument)
	case !validText(f.Owner):
		return fmt.Errorf("%w: owner: not valid UTF-8 or holds a NUL byte", ErrInvalidArgument)
	case !validText(f.Holder):
		return fmt.Errorf("%w: holder %q: not valid UTF-8 or holds a NUL byte", ErrInvalidArgument, f.Holder)
	}
	if _, err := f.Check(s); err != nil {
		return fmt.Errorf("pgledger: %s %s: %w", op, slotName(s), err)
	}
	if f.Planner != nil {
		return validateFenced(op, s, *f.Planner)
	}
	return nil
}
