package pgledger

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// Errors that report bad input. They are returned before the database is
// touched, wrapped with the offending value, and matched with errors.Is.
var (
	// ErrInvalidOptions is returned by New for a nil database or a
	// Options.Schema that is not a lower-case SQL identifier.
	ErrInvalidOptions = fmt.Errorf("pgledger: %w", errfamily.ErrInvalidOptions)

	// ErrInvalidArgument is returned for an empty or oversized job name,
	// an oversized partition, an empty owner, a token above math.MaxInt64,
	// maxAttempts or attempt below 1, a limit below 1, or a status that the
	// method does not take (Finish: succeeded or failed; Skip: skipped or
	// missed). Token 0 is refused with an error matching fence.ErrNoToken.
	ErrInvalidArgument = errors.New("pgledger: invalid argument")

	// ErrNotCreated is returned by the methods of a Ledger that was not
	// made by New (a nil or zero Ledger).
	ErrNotCreated = fmt.Errorf("pgledger: ledger %w", errfamily.ErrNotCreated)
)

// ErrRetryable matches a database error after which the call may simply be
// made again: a serialization failure (SQLSTATE 40001) or a deadlock
// (40P01). It is pgfence.ErrRetryable itself, so one errors.Is check (or
// pgfence.IsRetryable) covers both stores. The *pgconn.PgError stays
// reachable with errors.As.
//
// Every transition runs its own READ COMMITTED transaction (set
// explicitly, whatever the database's default_transaction_isolation) and
// takes its locks in one order (the (job, partition) fence row, the slot's
// fence row for a per-slot fence, then the slot's run), so neither should
// happen in practice; every read is one statement, run again (bounded,
// jittered, within ctx) when a SERIALIZABLE default makes it fail with
// 40001. Everything else is terminal for the
// call: a *fence.StaleTokenError never becomes fresh by retrying with the
// same token, and ErrSlotDone or ErrSlotRunning describe the slot.
var ErrRetryable = pgfence.ErrRetryable

// retryableCodes are the SQLSTATEs after which running the transaction again
// can succeed: the one place that decides retryable vs terminal.
var retryableCodes = map[string]bool{
	"40001": true, // serialization_failure
	"40P01": true, // deadlock_detected
}

// wrapDBError annotates an error from the database with what the ledger was
// doing. It adds ErrRetryable to the chain for retryable SQLSTATEs and keeps
// the original error (a *pgconn.PgError, a context error) reachable.
func wrapDBError(op, what string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && retryableCodes[pgErr.Code] {
		return fmt.Errorf("pgledger: %s %s: %w (%w)", op, what, err, ErrRetryable)
	}
	return fmt.Errorf("pgledger: %s %s: %w", op, what, err)
}

// validText reports whether s can be stored in a Postgres text column:
// valid UTF-8 without NUL bytes (Postgres rejects both).
func validText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// cleanText makes free text (an error message, a reason) storable: invalid
// UTF-8 and NUL bytes become U+FFFD, and the text is cut to at most
// MaxTextLen bytes on a rune boundary. A job's error must never make the
// ledger write that records it fail.
func cleanText(s string) string {
	if !validText(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	if len(s) <= MaxTextLen {
		return s
	}
	cut := MaxTextLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// nilContext is the error of method op called with a nil context.
func nilContext(op string) error { return fmt.Errorf("pgledger: %s: %w", op, ledger.ErrNilContext) }
