// Package leasejoin is for a store that takes or gives back leases in its
// own scripts, in the same round trip as writes of its own: the
// scheduler's Redis ledger begins each slot in the script that takes its
// lease, and records a run's end in the script that releases it (see
// redislease.Backend.Joinable). It hands such acquisitions to a
// lease.Client as Leases of that Client, renewed, released and lost as any
// other, and ends a Lease by such a release. Backend gives the backend a
// Client stores its leases in, to packages that build on that backend's
// keys or scripts (election, the scheduler's joined ledger, leasetest's
// ForceExpire). Users of leases need none of it: it is an SPI hook, kept
// off the user types (a user who needs the backend, say as a
// leasedriver.Inspector for the admin API, builds it and passes it to
// lease.NewWithBackend).
package leasejoin

import (
	"context"
	"time"

	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/internal/joinhooks"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
)

// Backend returns the backend c stores its leases in: the
// *redislease.Backend of a Client made by lease.New, the one passed to
// lease.NewWithBackend otherwise; nil for a nil c. Its holder label (the
// Client's Options.Holder) is leasedriver.Labeled's, when it implements it.
func Backend(c *lease.Client) leasedriver.Backend {
	return joinhooks.Backend(c)
}

// TryAcquireAll is c.TryAcquireAll with the batch's acquisitions made by
// acquire instead of the backend's AcquireAll: a caller that takes the
// leases in the same script as writes of its own gets them back as Leases
// of c, renewed, released and lost as any other. acquire gets one request
// per valid name (the owners drawn by c) and must answer each as c's
// backend's Acquire would, on c's backend's store and keys
// (redislease.Backend.Granted builds a grant of the Redis backend), with
// one Grant and one error per request (an error matching
// leasedriver.ErrNotTried for an acquisition it did not make, which the name is
// then answered with); it is called once, at most, and not at all when no
// name is valid. Grants answered too late for their trust window are
// undone with c's backend, as in TryAcquireAll. leases[i] and errs[i]
// answer names[i], with TryAcquireAll's errors; a nil c fails every name
// with lease.ErrNotCreated.
func TryAcquireAll(ctx context.Context, c *lease.Client, names []string, ttl time.Duration, acquire func(context.Context, []leasedriver.AcquireRequest) ([]leasedriver.Grant, []error)) (leases []*lease.Lease, errs []error) {
	ls, errs := joinhooks.TryAcquireAll(ctx, c, names, ttl, acquire)
	leases = make([]*lease.Lease, len(ls))
	for i, l := range ls {
		leases[i], _ = l.(*lease.Lease)
	}
	return leases, errs
}

// Release is l.Release with the key deleted by release instead of the
// backend's Release: a caller that gives the lease back in the same script
// as a write of its own ends the lease as Release does, keep-alive stopped
// first. release must answer as the backend's Release would (nil,
// lease.ErrNotHeld, another error) for h, this lease. It runs at most once
// per answer, as Release's compare-and-delete does: not at all when the
// lease was released before (Release then returns that answer), again on a
// later call after an error without an answer. Errors as l.Release's.
func Release(ctx context.Context, l *lease.Lease, release func(ctx context.Context, h leasedriver.Held) error) error {
	return joinhooks.Release(ctx, l, release)
}
