package lease

import "time"

// Observer receives measurements from a Client; lease/leaseprom.Observer
// turns them into Prometheus collectors. Methods are called synchronously
// from the lease's goroutines and must not block. Lease names are passed
// for logs; keep them out of metric labels (they are unbounded).
//
// Every method gets the error of what it measures, nil on success, so an
// observer classifies outcomes with errors.Is as callers do. For a bounded
// metric label, ObserveAcquire's err falls into four classes: nil
// (acquired), ErrNotAcquired (held by another owner), ErrSlowAcquire (a
// grant answered after its trust window ended: not handed out, and undone)
// and any other error.
type Observer interface {
	// ObserveAcquire is called once per acquire attempt (one round trip)
	// that reached the backend; took is its duration.
	ObserveAcquire(name string, err error, took time.Duration)
	// ObserveRenew is called once per renewed lease; err is nil on success.
	// took is the duration of the call (a batch's, for batched renewals).
	ObserveRenew(name string, err error, took time.Duration)
	// ObserveLoss is called once when a lease ends; reason is ErrReleased,
	// ErrNotHeld (joined with ErrEvicted when Redis was seen evicting keys),
	// ErrExpired or ErrParentDone (joined with the lifetime context's cause).
	ObserveLoss(name string, reason error)
	// ObserveEvictions is called with the number of keys Redis evicted
	// since the previous report (> 0), by a Client whose backend runs on
	// an evicting Redis (redislease.Eviction.AllowEviction). The Client
	// reads Redis's eviction counter on its renewal passes, at most once a
	// second (less often with long TTLs: at most every TTL/3 of the
	// shortest TTL held), and at once when a renewal finds a lease not held.
	ObserveEvictions(n int64)
}

type nopObserver struct{}

func (nopObserver) ObserveAcquire(string, error, time.Duration) {}
func (nopObserver) ObserveRenew(string, error, time.Duration)   {}
func (nopObserver) ObserveLoss(string, error)                   {}
func (nopObserver) ObserveEvictions(int64)                      {}
