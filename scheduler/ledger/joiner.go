package ledger

import (
	"context"
	"errors"
	"time"

	"github.com/holdfast-go/holdfast/lease/leasedriver"
)

// LeaseJoiner is an optional Ledger interface for a ledger that can take
// and give back the scheduler's unit leases in the same round trip as its
// own transitions, on a lease backend it shares a store with
// (redisledger on redislease.Backend over the same client). The scheduler
// uses it, when the lease Client's backend is joinable, for the slots due
// on time: one call takes a batch of leases and begins each slot under its
// lease where nothing else is due (ClearBeginner's rule), and a run's end
// records the outcome and releases the lease in one step.
//
// ClaimAll answers each request (one result per request, in order) or
// returns ErrNotJoinable (nothing done) when leases is not a backend it can
// join; called with no requests, it only tells, without I/O. It takes at
// most limit leases (limit > 0), in request order: once it took limit,
// a later request whose lease is held is answered as held, and one whose
// lease is free is not tried (Err matching leasedriver.ErrNotTried), so that a
// caller with few places to run claims asks for many units in one call
// and learns which ones others hold. A lease is taken as the backend's Acquire takes it, and a slot is
// begun only under a lease the same call took, fenced with its token (the
// Fence of Scope Lease.Name, the token issued, Lease.Holder().Owner), as Begin
// does.
//
// FinishRelease is Finish under f and the release of h, the lease f
// presents (f.Scope h.Name, f.Owner h.Owner, the unit scope); the release
// is made whether or not the fence accepts the finish. finishErr is
// Finish's error, releaseErr the backend's Release answer (nil,
// lease.ErrNotHeld, a store error). A ledger that cannot join the two
// makes them one after the other.
type LeaseJoiner interface {
	ClaimAll(ctx context.Context, leases leasedriver.Backend, reqs []ClaimRequest, limit int, now time.Time) ([]ClaimResult, error)
	FinishRelease(ctx context.Context, leases leasedriver.Backend, h leasedriver.Held, s Slot, f Fence, attempt int, o Outcome, now time.Time) (finishErr, releaseErr error)
}

// ErrNotJoinable is returned by LeaseJoiner.ClaimAll for a lease backend
// the ledger cannot join (another store or client, replica
// acknowledgements it cannot wait for).
var ErrNotJoinable = errors.New("ledger: the lease backend cannot be joined to the ledger")

// ClaimRequest is one unit of LeaseJoiner.ClaimAll: the acquisition of its
// lease and, when Begin is not nil, its slot to begin under that lease as
// ClearBeginner.BeginIfClear would. Begin.Fence is ignored: the lease's
// fences the begin. A Begin whose slot's UnitScope is not Lease.Name is not
// made (Clear false).
//
// CheckOnly, with Begin, asks for Begin's slot to be read, not begun: a
// slot found done (succeeded, skipped or missed, with no request pending
// for the unit) is answered as a done begin (Clear, ErrSlotDone) without
// taking the lease; otherwise the lease is taken as without Begin and the
// answer's Begin is not Clear (the caller plans). The scheduler asks so
// for a fire it must plan (a late one, whose missed-slot policy decides):
// a replica that comes after the slot's run then pays a read, not a claim.
type ClaimRequest struct {
	Lease     leasedriver.AcquireRequest
	Begin     *BeginRequest
	CheckOnly bool
}

// ClaimResult answers a ClaimRequest: Grant and Err as the backend's
// Acquire answers, and Begin, when a begin was asked for and the lease
// taken, as BeginIfClear answers it (nil otherwise).
type ClaimResult struct {
	Grant leasedriver.Grant
	Err   error
	Begin *BeginResult
}
