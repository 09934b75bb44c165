package fence

import (
	"errors"
	"strconv"
)

// ErrUnknownFormat is matched (errors.Is) by every *FormatError: a holdfast
// store found state written in a stored format this build does not know
// (a newer build's, another store's, or foreign data under the store's key
// prefix or table), and refused to read or write it. See
// docs/compatibility.md for which builds may share a store.
var ErrUnknownFormat = errors.New("holdfast: unknown stored format")

// FormatError is returned by a holdfast store (lease backends, ledgers,
// sinks, idempotency stores) on first use when the format marker it finds
// is not its own: the marker key "<prefix>format" in Redis, the table
// comment in PostgreSQL. Nothing is read or written past the check. It
// matches ErrUnknownFormat.
type FormatError struct {
	// Store is the package that refused, e.g. "lease/redislease".
	Store string
	// Where is the marker's place: a Redis key or a schema-qualified table.
	Where string
	// Found is the marker as stored, e.g. "holdfast scheduler/ledger/redisledger format 1".
	Found string
	// Want is the marker this build writes and reads, e.g. "holdfast lease/redislease format 1".
	Want string
}

func (e *FormatError) Error() string {
	return e.Store + ": " + e.Where + " holds stored format " + strconv.Quote(e.Found) +
		", this build reads and writes " + strconv.Quote(e.Want) + " only (docs/compatibility.md)"
}

// Is reports whether target is ErrUnknownFormat.
func (e *FormatError) Is(target error) bool { return target == ErrUnknownFormat }
