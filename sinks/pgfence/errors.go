package pgfence

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/errfamily"
)

// Errors that report bad input. They are returned before the database is
// touched, wrapped with the offending value, and matched with errors.Is.
var (
	// ErrInvalidOptions is returned by New when Options.Schema or Options.Table
	// is not a valid identifier (see Options), and by Migrate, Check,
	// Current, FencedUpdate and FencedUpsert given a nil database or
	// transaction (a nil interface or a typed nil such as a nil
	// *pgxpool.Pool) or a nil context.
	ErrInvalidOptions = fmt.Errorf("pgfence: %w", errfamily.ErrInvalidOptions)

	// ErrInvalidResource is returned for an empty resource, one longer than
	// MaxResourceLen bytes, or one that is not valid UTF-8 or holds a NUL byte.
	ErrInvalidResource = errors.New("pgfence: invalid resource")

	// ErrInvalidScope is returned for a scope (fence.Holder.Scope) longer
	// than MaxScopeLen bytes, or one that is not valid UTF-8 or holds a NUL
	// byte. The empty scope is valid.
	ErrInvalidScope = errors.New("pgfence: invalid scope")

	// ErrInvalidOwner is returned for an empty owner, or one that is not
	// valid UTF-8 or holds a NUL byte.
	ErrInvalidOwner = errors.New("pgfence: invalid owner")

	// ErrTokenOutOfRange is returned for a token above math.MaxInt64: the
	// guard stores tokens in a Postgres bigint. Lease tokens stay below 2^53.
	ErrTokenOutOfRange = errors.New("pgfence: fencing token out of range")

	// ErrNotCreated is returned by the methods of a Guard that was not made
	// by New (a nil or zero Guard).
	ErrNotCreated = fmt.Errorf("pgfence: guard %w", errfamily.ErrNotCreated)

	// ErrInvalidIdentifier is returned by FencedUpdate and FencedUpsert for
	// a table name, key column or set column that is empty, not valid UTF-8
	// or holds a NUL byte, and for a set column that names the key column
	// or one of the fence columns (TokenColumn, OwnerColumn, ScopeColumn).
	ErrInvalidIdentifier = errors.New("pgfence: invalid identifier")
)

// ErrScopeMismatch is returned by FencedUpdate and FencedUpsert when the
// row's token was set under another scope (fence.Holder.Scope: another
// lease) than the write's. A row has one token column, so it can be fenced
// by one lease only; comparing the tokens of two leases would let a stale
// holder of one through whenever the other wrote last, so the write is
// refused instead. It is not a stale-token error and retrying does not
// help: give each lease its own rows, use the guard table (Guard.Check
// keeps one fence per (resource, scope)), or present one shared Scope from
// every writer of the row on purpose. Nothing was written. It wraps
// fence.ErrScopeMismatch, which code that knows no sink (the scheduler's
// retry classification) matches.
var ErrScopeMismatch = fmt.Errorf("pgfence: row fenced under another scope: %w", fence.ErrScopeMismatch)

// ErrRowNotFound is returned by FencedUpdate when no row has the given key.
// It is told apart from a refusal by the acceptance rule, which returns a
// *fence.StaleTokenError instead. Use FencedUpsert for a row's first write.
var ErrRowNotFound = errors.New("pgfence: row not found")

// ErrRetryable matches a database error after which the caller should roll
// back and run the whole transaction again: a serialization failure
// (SQLSTATE 40001) or a deadlock (40P01). The *pgconn.PgError stays
// reachable with errors.As. Under the default READ COMMITTED isolation Check,
// FencedUpdate and FencedUpsert produce neither; under REPEATABLE READ or
// SERIALIZABLE a concurrent writer of the same resource or row makes them
// fail with 40001. FencedUpdate and FencedUpsert also return ErrRetryable
// (without a *pgconn.PgError) in one rare case under READ COMMITTED: the
// write was refused, but the row was deleted or changed outside the rule
// before the follow-up read could explain the refusal.
//
// Everything else is terminal for the transaction: a *fence.StaleTokenError
// never becomes fresh by retrying with the same token.
var ErrRetryable = errors.New("pgfence: retryable database error")

// IsRetryable reports whether err is worth rolling back and running the
// whole transaction again for: it matches ErrRetryable, or it holds a
// *pgconn.PgError with a retryable SQLSTATE (40001, 40P01) that did not
// pass through pgfence. Use it on the error of the whole transaction:
// under SERIALIZABLE the failure often comes from COMMIT (pgx.BeginTxFunc
// returns it unwrapped), not from the statement pgfence ran.
func IsRetryable(err error) bool {
	if errors.Is(err, ErrRetryable) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && retryableCodes[pgErr.Code]
}

// retryableCodes are the SQLSTATEs after which running the transaction again
// can succeed. This is the one place that decides retryable vs terminal.
var retryableCodes = map[string]bool{
	"40001": true, // serialization_failure
	"40P01": true, // deadlock_detected
}

// wrapDBError annotates an error from the database with what pgfence was
// doing. It adds ErrRetryable to the chain for retryable SQLSTATEs and keeps
// the original error (a *pgconn.PgError, a context error) reachable.
func wrapDBError(op, resource string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && retryableCodes[pgErr.Code] {
		return fmt.Errorf("pgfence: %s %q: %w (%w)", op, resource, err, ErrRetryable)
	}
	return fmt.Errorf("pgfence: %s %q: %w", op, resource, err)
}
