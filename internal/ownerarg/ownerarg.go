// Package ownerarg holds Owner and Owners, the forms in which every
// holdfast package hands lease owners to a database driver as command or
// query arguments.
//
// An owner is a write capability: with the token, a sink accepts it as the
// holder's write (docs/security.md, rows 1 and 1b). A plain string
// argument shows in every text form a driver or its hooks make of a
// command: go-redis' cmd.String() and log lines, redisotel's tracing hook
// (each command's arguments are the span's db.statement by default), and
// pgx's tracelog (each query's arguments are logged). An Owner goes on
// the wire as its bytes and prints as "[owner]" in every text form:
//
//   - go-redis writes an argument that is an encoding.BinaryMarshaler as
//     the bytes it returns (a script reads the same ARGV as for a string),
//     and it and its extra/rediscmd print an argument of a type they do
//     not know with fmt, which calls Format;
//   - pgx encodes a driver.Valuer by the value it returns (the string: a
//     text parameter, as before; its other rules for a named type skip a
//     Valuer), in every query mode, and tracelog logs an argument that is
//     not a plain string or []byte as it is, for the logger to print (fmt:
//     Format; encoding/json: MarshalJSON; slog: LogValue).
package ownerarg

import (
	"database/sql/driver"
	"fmt"
	"io"
	"log/slog"
	"unsafe"
)

// Redacted is how an Owner prints.
const Redacted = "[owner]"

// Owner is a lease owner as a driver argument: sent as itself, printed as
// Redacted. Its conversion to an interface (a command's []any) costs what
// a string's does.
type Owner string

// MarshalBinary returns the owner's bytes, for go-redis' writer, without
// a copy: the writer only reads them (into its buffer), and nothing may
// write to the slice.
func (o Owner) MarshalBinary() ([]byte, error) {
	return unsafe.Slice(unsafe.StringData(string(o)), len(o)), nil
}

// Value returns the owner as a string (driver.Valuer), for pgx and
// database/sql.
func (o Owner) Value() (driver.Value, error) { return string(o), nil }

// Format prints Redacted for every verb and flag (%d and %x included),
// quoted for %#v.
func (Owner) Format(f fmt.State, verb rune) { format(f, verb) }

// LogValue returns Redacted (slog).
func (Owner) LogValue() slog.Value { return slog.StringValue(Redacted) }

// MarshalJSON returns Redacted as a JSON string (encoding/json).
func (Owner) MarshalJSON() ([]byte, error) { return []byte(`"` + Redacted + `"`), nil }

// Owners is a list of owners as one driver argument (a Postgres text[]):
// sent as the list, printed as Redacted.
type Owners []string

// Value returns the owners as a []string (driver.Valuer): pgx encodes it
// as a text[].
func (o Owners) Value() (driver.Value, error) { return []string(o), nil }

// Format prints Redacted for every verb and flag, quoted for %#v.
func (Owners) Format(f fmt.State, verb rune) { format(f, verb) }

// LogValue returns Redacted (slog).
func (Owners) LogValue() slog.Value { return slog.StringValue(Redacted) }

// MarshalJSON returns Redacted as a JSON string (encoding/json).
func (Owners) MarshalJSON() ([]byte, error) { return []byte(`"` + Redacted + `"`), nil }

// FormatMasked writes the masked forms of a value that holds an owner
// (fence.Holder, *lease.Lease, scheduler.Run, *election.Leadership) for
// its fmt.Formatter: goString for %#v, s quoted for %q, s for every other
// verb (%d and %x included), as a string: width, precision and the '-'
// flag apply as to %s ("%-40v" pads, "%.8v" cuts), and %+q and %#q quote
// as they do a string. Without a Format method, fmt prints such a value's
// fields one by one for every verb but %v, %s, %q, %x and %X, owner
// included.
func FormatMasked(f fmt.State, verb rune, s, goString string) {
	switch {
	case verb == 'v' && f.Flag('#'):
		s = goString
		verb = 's'
	case verb != 'q':
		verb = 's'
	}
	// FormatString keeps the flags: '#' and '+' mean nothing to %s, and
	// quote as they should with %q.
	_, _ = fmt.Fprintf(f, fmt.FormatString(f, verb), s)
}

func format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, `"`+Redacted+`"`)
		return
	}
	_, _ = io.WriteString(f, Redacted)
}
