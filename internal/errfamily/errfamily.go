// Package errfamily is the one home of the error family every holdfast
// package exports under its own name: invalid options, a value not created
// with New, a nil context.
//
// Each package keeps its exported sentinel (lease.ErrInvalidOptions,
// pgfence.ErrNotCreated, ...), made by wrapping the family's value with the
// package's prefix:
//
//	ErrInvalidOptions = fmt.Errorf("lease: %w", errfamily.ErrInvalidOptions)
//
// so that its text stays "lease: invalid options", errors.Is(err,
// lease.ErrInvalidOptions) matches that package's errors only (another
// package's sentinel is another value), and errors.Is(err,
// errfamily.ErrInvalidOptions) matches the member of any package, for
// holdfast's own code that handles them alike.
package errfamily

import "errors"

// The family. Wrap them with the package's prefix; never return them bare.
var (
	// ErrInvalidOptions: a constructor or call refused out-of-range options.
	ErrInvalidOptions = errors.New("invalid options")
	// ErrNotCreated: a method of a nil value or of one not made by New.
	ErrNotCreated = errors.New("not created with New")
	// ErrNilContext: a nil context.Context was passed.
	ErrNilContext = errors.New("nil context")
)
