package lease

import (
	"errors"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
)

// Errors for bad input. They are returned before any I/O.
var (
	// ErrInvalidName is returned for an empty or oversized lease name, one
	// that holds a '{' or '}' (they would break the Cluster hash tag), one
	// that is not UTF-8 without control (Unicode Cc), format (Cf: U+200B,
	// U+202E, ...) or other default-ignorable characters (U+3164, U+034F,
	// ...), or one of white space alone: names that would look like other
	// names, or like nothing, to an operator.
	ErrInvalidName = leasedriver.ErrInvalidName
	// ErrInvalidTTL is returned for a TTL below leasedriver.MinTTL (10 ms).
	ErrInvalidTTL = leasedriver.ErrInvalidTTL
	// ErrInvalidOptions is returned by New and NewWithBackend for
	// out-of-range Options, and for a nil Redis client or backend (the
	// error then matches leasedriver.ErrNilClient too).
	ErrInvalidOptions = leasedriver.ErrInvalidOptions
	// ErrNotCreated is returned by the methods of a nil Client, or of one
	// not made by New or NewWithBackend (a zero Client{}).
	ErrNotCreated = fmt.Errorf("lease: client %w", errfamily.ErrNotCreated)
	// ErrNilContext is returned for a nil context.Context: pass
	// context.Background() (or context.TODO()) when there is none.
	// It is leasedriver.ErrNilContext, which the backends return.
	ErrNilContext = leasedriver.ErrNilContext
)

// Errors for lease states.
var (
	// ErrNotAcquired matches every *NotAcquiredError: the lease is held by
	// another owner. Acquire and election's Campaign also join it to the
	// context's error when the context ended before a try could tell, so
	// its own text says no more than "not acquired".
	ErrNotAcquired = errors.New("lease: not acquired")
	// ErrNotHeld is returned by Renew and Release, and is the cause of a
	// loss, when the key no longer holds our owner: it expired, was
	// deleted, or was taken by someone else.
	ErrNotHeld = leasedriver.ErrNotHeld
	// ErrLost matches every *LostError, the cause of a canceled
	// Lease.Context.
	ErrLost = errors.New("lease: lost")
	// ErrExpired is the cause of a loss when the trust window ended
	// without a successful renew (Redis unreachable, slow or hung).
	ErrExpired = errors.New("lease: trust window ended without a successful renew")
	// ErrReleased is the cause of a loss when Release was called.
	ErrReleased = errors.New("lease: released")
	// ErrParentDone is the cause of a loss when the lifetime context
	// (WithLifetime) ended; that context's own cause is joined to it.
	ErrParentDone = errors.New("lease: lifetime context ended")
	// ErrSlowAcquire matches every slow-grant error: the grant came back
	// after its trust window had ended. The error is a
	// *leasedriver.SlowAcquireError (Name, Took, TTL) on every backend
	// (lease/quorum returns the same type for its own check); no token was
	// handed out and the key was undone.
	ErrSlowAcquire = leasedriver.ErrSlowAcquire
)

// NotAcquiredError reports a lease held by another owner. It matches
// ErrNotAcquired.
type NotAcquiredError struct {
	// Name is the lease name.
	Name string
	// RemainingTTL is the holder's remaining TTL as Redis reported it
	// (ms precision); 0 when unknown.
	RemainingTTL time.Duration
}

// Error implements error.
func (e *NotAcquiredError) Error() string {
	return fmt.Sprintf("lease %q: not acquired, held by another owner for %v more", e.Name, e.RemainingTTL)
}

// Unwrap returns ErrNotAcquired, so that errors.Is(err, ErrNotAcquired)
// holds.
func (e *NotAcquiredError) Unwrap() error { return ErrNotAcquired }

// LostError is the cause (context.Cause) of a canceled Lease.Context. It
// matches ErrLost, and unwraps to the reason: ErrNotHeld, ErrExpired,
// ErrReleased or ErrParentDone (joined with the lifetime context's cause).
type LostError struct {
	// Name is the lease name.
	Name string
	// Reason says why the lease was lost.
	Reason error
}

// Error implements error.
func (e *LostError) Error() string { return fmt.Sprintf("lease %q lost: %v", e.Name, e.Reason) }

// Unwrap returns ErrLost and the reason, so that errors.Is(err, ErrLost)
// and errors.Is(err, ErrExpired) (or another reason) both hold.
func (e *LostError) Unwrap() []error { return []error{ErrLost, e.Reason} }
