package lease

import "time"

// AcquireOutcome classifies one acquire attempt for an Observer.
type AcquireOutcome string

// Acquire outcomes. A bounded set: safe as a metric label.
const (
	OutcomeAcquired AcquireOutcome = "acquired"
	OutcomeHeld     AcquireOutcome = "held"
	OutcomeError    AcquireOutcome = "error"
	// OutcomeSlow is a grant answered after its trust window had ended
	// (*SlowAcquireError): not handed out, and undone.
	OutcomeSlow AcquireOutcome = "slow"
)

// Observer receives measurements from a Client; package lease/leaseprom
// turns them into Prometheus collectors. Methods are called synchronously
// from the lease's goroutines and must not block. Lease names are passed
// for logs; keep them out of metric labels (they are unbounded).
type Observer interface {
	// ObserveAcquire is called once per acquire attempt (one round trip).
	ObserveAcquire(name string, outcome AcquireOutcome, took time.Duration)
	// ObserveRenew is called once per renewed lease; err is nil on success.
	// took is the duration of the call (a batch's, for batched renewals).
	ObserveRenew(name string, err error, took time.Duration)
	// ObserveLoss is called once when a lease ends; reason is ErrReleased,
	// ErrNotHeld, ErrExpired or ErrParentDone (joined with the lifetime
	// context's cause).
	ObserveLoss(name string, reason error)
}

type nopObserver struct{}

func (nopObserver) ObserveAcquire(string, AcquireOutcome, time.Duration) {}
func (nopObserver) ObserveRenew(string, error, time.Duration)            {}
func (nopObserver) ObserveLoss(string, error)                            {}
