package leasedriver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/internal/safe"
)

// The errors a Client and its backends share; package lease names them
// too (lease.ErrNotHeld is ErrNotHeld), and users match them there.
var (
	// ErrInvalidOptions is returned for out-of-range options, by
	// lease.New and by the backends' constructors.
	ErrInvalidOptions = fmt.Errorf("lease: %w", errfamily.ErrInvalidOptions)
	// ErrNilClient is returned for a nil Redis client (or a nil backend).
	// It matches ErrInvalidOptions too.
	ErrNilClient = fmt.Errorf("%w: nil redis client", ErrInvalidOptions)
	// ErrInvalidName is returned for a lease name CheckName refuses.
	ErrInvalidName = errors.New("lease: invalid lease name")
	// ErrNotHeld is a backend's answer to a Renew or Release of a lease
	// that no longer holds its owner: it expired, was deleted, or was
	// taken by someone else.
	ErrNotHeld = errors.New("lease: not held")
	// ErrNotTried answers a name of lease/leasejoin.TryAcquireAll whose acquisition
	// its acquire function did not make (it took as many leases as its
	// caller could use and found this one free): nothing was taken, and
	// nothing is logged or observed for it.
	ErrNotTried = errors.New("lease: acquisition not tried")
	// ErrNilContext is returned by a backend's methods called with a nil
	// context.Context, before any I/O.
	ErrNilContext = fmt.Errorf("lease: %w", errfamily.ErrNilContext)
)

// Errs returns n copies of err: the answer of a batch method to a call
// refused whole.
func Errs(n int, err error) []error {
	errs := make([]error, n)
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// CheckContext returns ErrNilContext for a nil ctx, nil otherwise.
func CheckContext(ctx context.Context) error {
	if ctx == nil {
		return ErrNilContext
	}
	return nil
}

// Limits on input.
const (
	// MaxNameLen is the longest lease name in bytes.
	MaxNameLen = 256
	// MaxHolderLen is the longest holder label (lease.Options.Holder) in
	// bytes.
	MaxHolderLen = 256
)

// CheckName returns an error matching ErrInvalidName unless name is a
// valid lease name: not empty, at most MaxNameLen bytes, without '{' or
// '}' (they would break a Redis Cluster hash tag), UTF-8 without control
// (Unicode Cc), format (Cf: U+200B, U+202E, ...) or other default-ignorable
// characters (U+3164, U+034F, variation selectors, ...), and not white
// space alone: names that would look like other names, or like nothing,
// to an operator. lease.Client checks every name with it before
// any I/O; backends that derive keys from names check them with it too.
func CheckName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidName, len(name), MaxNameLen)
	case strings.ContainsAny(name, "{}"):
		return fmt.Errorf("%w: %q holds '{' or '}'", ErrInvalidName, name)
	case !safe.Printable(name):
		return fmt.Errorf("%w: %q is not UTF-8 without control, format or default-ignorable characters", ErrInvalidName, name)
	case safe.Blank(name):
		return fmt.Errorf("%w: %q is blank", ErrInvalidName, name)
	}
	return nil
}

// CheckHolder returns an error matching ErrInvalidOptions unless label is
// a valid holder label (lease.Options.Holder): at most MaxHolderLen bytes
// of UTF-8 without control or format characters, so that a label cannot
// pass for another in a view. "" (no label) is valid. Backends that store
// the label check it with this function.
func CheckHolder(label string) error {
	switch {
	case len(label) > MaxHolderLen:
		return fmt.Errorf("%w: Holder of %d bytes, at most %d", ErrInvalidOptions, len(label), MaxHolderLen)
	case label != "" && strings.TrimSpace(label) == "":
		return fmt.Errorf("%w: Holder %q is blank", ErrInvalidOptions, label)
	case !safe.Printable(label) || strings.ContainsFunc(label, isFormat):
		return fmt.Errorf("%w: Holder %q is not UTF-8 without control, format or default-ignorable characters", ErrInvalidOptions, label)
	}
	return nil
}

// isFormat reports a format character (Unicode Cf: zero-width space,
// right-to-left override, ...), which would let one label look like another.
func isFormat(r rune) bool { return unicode.Is(unicode.Cf, r) }
