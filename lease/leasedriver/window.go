package leasedriver

import (
	"errors"
	"fmt"
	"time"
)

// The trust window: the rule a Client applies to every grant and renewal,
// and a backend that times its own acquisition (lease/quorum) applies too.
// A holder may act until the start of its acquire or renew call + TTL -
// Drift(TTL).

// MinTTL is the shortest TTL a lease may have (10 ms): CheckTTL's limit.
const MinTTL = 10 * time.Millisecond

var (
	// ErrInvalidTTL is returned for a TTL CheckTTL refuses; package lease
	// names it too (lease.ErrInvalidTTL).
	ErrInvalidTTL = errors.New("lease: invalid TTL")
	// ErrSlowAcquire matches every *SlowAcquireError: the grant came back
	// after its trust window had ended. Package lease names it too
	// (lease.ErrSlowAcquire), where users match it.
	ErrSlowAcquire = errors.New("lease: acquire answered after TTL - drift")
)

// CheckTTL returns an error matching ErrInvalidTTL for a ttl below MinTTL.
// lease.Client checks every TTL with it before any I/O; packages that take
// a TTL for later acquisitions (election.Options.TTL, scheduler.Job.LeaseTTL)
// check it up front with it.
func CheckTTL(ttl time.Duration) error {
	if ttl < MinTTL {
		return fmt.Errorf("%w: %v, at least %v", ErrInvalidTTL, ttl, MinTTL)
	}
	return nil
}

// Drift is the margin taken off a TTL to form the trust window: 1% of the
// TTL plus 2 ms, for clock-rate differences between the process and the
// store and for the time the reply spends on the wire.
func Drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// SlowAcquireError reports an acquisition whose grant arrived Took after
// the call started, at or past TTL - Drift(TTL): the trust window had
// already ended, so the store may have expired the key and handed it to
// another owner. No token is handed out; the key was released on a best
// effort (a compare-and-delete of this acquisition's owner, bounded by the
// TTL). lease.Client returns it on every backend; a backend that finds its
// own grant too late may return it too. It matches ErrSlowAcquire
// (lease.ErrSlowAcquire).
type SlowAcquireError struct {
	// Name is the lease name.
	Name string
	// Took is how long the acquisition took, from the call's start to its
	// answer; TTL is the TTL it asked for.
	Took, TTL time.Duration
}

// Error implements error.
func (e *SlowAcquireError) Error() string {
	return fmt.Sprintf("lease %q: acquire answered after %v, past the %v trust window of its %v TTL",
		e.Name, e.Took, e.TTL-Drift(e.TTL), e.TTL)
}

// Unwrap returns ErrSlowAcquire, so that errors.Is(err, ErrSlowAcquire)
// holds.
func (e *SlowAcquireError) Unwrap() error { return ErrSlowAcquire }
