package fence

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// Token is a fencing token: strictly increasing per lease name across
// acquisitions. The zero value means "no token" and is never accepted.
type Token uint64

// None is the zero Token: no token was issued.
const None Token = 0

// maxTokenDigits is the length of the largest uint64 in decimal.
const maxTokenDigits = 20

// ErrInvalidToken is returned by ParseToken for text that is not a decimal
// uint64 in canonical form.
var ErrInvalidToken = errors.New("fence: invalid fencing token")

// String returns the token in decimal.
func (t Token) String() string { return strconv.FormatUint(uint64(t), 10) }

// IsZero reports whether t is None.
func (t Token) IsZero() bool { return t == None }

// ParseToken parses a token in canonical decimal form: 1 to 20 ASCII digits,
// no sign, no leading zero (except "0" itself), no surrounding space, at most
// 2^64-1. It returns an error matching ErrInvalidToken otherwise. "0" parses
// to None; whether None is acceptable is the caller's rule (sinks refuse it).
func ParseToken(s string) (Token, error) {
	if len(s) == 0 || len(s) > maxTokenDigits {
		return None, fmt.Errorf("%w: %q: want 1 to %d decimal digits", ErrInvalidToken, truncate(s), maxTokenDigits)
	}
	if len(s) > 1 && s[0] == '0' {
		return None, fmt.Errorf("%w: %q: leading zero", ErrInvalidToken, truncate(s))
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return None, fmt.Errorf("%w: %q: not a decimal digit at offset %d", ErrInvalidToken, truncate(s), i)
		}
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return None, fmt.Errorf("%w: %q: out of range", ErrInvalidToken, truncate(s))
	}
	return Token(v), nil
}

func truncate(s string) string {
	const max = 32
	if len(s) > max {
		return s[:max] + "..."
	}
	return s
}

type ctxKey struct{}

// WithHolder returns a copy of ctx that carries h. Sinks and clients read
// it back with HolderFromContext: the HTTP client sends it as the
// Fencing-Token, Fencing-Owner and Fencing-Scope headers, and code far from
// the lease (a repository layer) passes it to a sink. A lease's Context
// carries its holder already (package lease).
func WithHolder(ctx context.Context, h Holder) context.Context {
	// A pointer: fmt prints a pointer inside another value (the context's
	// %#v, %+v) as an address, where a Holder in a context's unexported
	// field would be printed field by field, its owner with it.
	return context.WithValue(ctx, ctxKey{}, &h)
}

// HolderFromContext returns the holder carried by ctx. ok is false when ctx
// carries none or carries one whose token is None.
func HolderFromContext(ctx context.Context) (h Holder, ok bool) {
	p, found := ctx.Value(ctxKey{}).(*Holder)
	if !found || p == nil || p.Token == None {
		return Holder{}, false
	}
	return *p, true
}
