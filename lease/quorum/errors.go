package quorum

import (
	"errors"
	"fmt"

	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/lease"
)

// Errors for bad input, returned by New before any I/O.
var (
	// ErrInvalidMasters is returned by New when masters is not an odd
	// number (at least 3) of distinct, non-nil clients.
	ErrInvalidMasters = errors.New("quorum: want an odd number >= 3 of distinct, non-nil masters")
	// ErrInvalidOptions is returned by New for out-of-range Options.
	ErrInvalidOptions = fmt.Errorf("quorum: %w", errfamily.ErrInvalidOptions)
)

// Errors for the states of a quorum operation.
var (
	// ErrNoQuorum matches every *NoQuorumError: fewer than a majority of
	// the masters answered, so the operation could not decide. It is
	// retryable: the keep-alive retries a renew until the trust window
	// ends; an acquire can be tried again.
	ErrNoQuorum = errors.New("quorum: no majority of masters answered")
	// ErrSlowAcquire matches the *leasedriver.SlowAcquireError of an
	// acquisition that reached a majority of the masters, but whose lock
	// and token phases together took TTL - leasedriver.Drift(TTL) or
	// longer: by the time the token was ready, some keys may already have
	// expired. The keys were released and the token is unused. It is
	// lease.ErrSlowAcquire itself, with the same error type as
	// lease.Client's own check, so one errors.Is or errors.As covers a
	// slow acquire on every backend.
	ErrSlowAcquire = lease.ErrSlowAcquire
)

// NoQuorumError reports an operation that fewer than Quorum of the Nodes
// masters answered. It matches ErrNoQuorum and unwraps to the masters'
// errors (redsync's *RedisError, each naming its node).
type NoQuorumError struct {
	// Op is the phase that failed: "format" (too few masters had their
	// stored format checked, see Backend.Acquire), "acquire" (the lock and the token
	// candidates), "raise" (the token raise), "renew" or "release".
	Op string
	// Nodes is the number of masters, Quorum the majority of them
	// (Nodes/2 + 1).
	Nodes, Quorum int
	// Answered is how many masters answered at all, and Agreed how many
	// of them answered yes (granted the lock, raised their counter to the
	// token, extended or deleted the key). Renew and release can have a
	// majority answering but split between yes and "not ours".
	Answered, Agreed int
	// Err joins the masters' errors; nil when none was reported.
	Err error
}

// Error implements error.
func (e *NoQuorumError) Error() string {
	msg := fmt.Sprintf("quorum: %s: no majority: %d of %d masters answered, %d agreed, %d needed",
		e.Op, e.Answered, e.Nodes, e.Agreed, e.Quorum)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrNoQuorum) true.
func (e *NoQuorumError) Is(target error) bool { return target == ErrNoQuorum }

// Unwrap returns the masters' errors.
func (e *NoQuorumError) Unwrap() error { return e.Err }
