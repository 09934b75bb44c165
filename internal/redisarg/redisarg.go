// Package redisarg holds Owner, the form in which every holdfast package
// hands a lease owner to go-redis as a command argument.
//
// An owner is a write capability: with the token, a sink accepts it as the
// holder's write (docs/security.md, row 1). A plain string argument shows
// in every text form of a command: cmd.String(), go-redis' own log lines
// and, above all, the hooks users install on their clients, such as
// redisotel's tracing hook, which records each command's arguments as the
// span's db.statement by default (extra/redisotel WithDBStatement). An
// Owner goes on the wire as its bytes (go-redis writes an argument that is
// an encoding.BinaryMarshaler as the bytes it returns, and a script reads
// the same ARGV as before) and prints as "[owner]" in every text form
// (go-redis and its extra/rediscmd format an argument of a type they do
// not know with fmt, which calls Format).
package redisarg

import (
	"fmt"
	"io"
	"log/slog"
	"unsafe"
)

// Redacted is how an Owner prints.
const Redacted = "[owner]"

// Owner is a lease owner as a go-redis command argument: sent as its
// bytes, printed as Redacted. Its conversion to an interface (a command's
// []any) costs what a string's does.
type Owner string

// MarshalBinary returns the owner's bytes, for go-redis' writer, without
// a copy: the writer only reads them (into its buffer), and nothing may
// write to the slice.
func (o Owner) MarshalBinary() ([]byte, error) {
	return unsafe.Slice(unsafe.StringData(string(o)), len(o)), nil
}

// String returns Redacted (go-redis' cmd.String and extra/rediscmd print
// an argument of a type they do not know with fmt.Sprint).
func (Owner) String() string { return Redacted }

// Format prints Redacted for every verb and flag (%d and %x included),
// quoted for %#v.
func (Owner) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		_, _ = io.WriteString(f, `"`+Redacted+`"`)
		return
	}
	_, _ = io.WriteString(f, Redacted)
}

// LogValue returns Redacted (slog).
func (Owner) LogValue() slog.Value { return slog.StringValue(Redacted) }
