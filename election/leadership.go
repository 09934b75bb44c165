package election

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/ownerarg"
	"github.com/holdfast-go/holdfast/lease"
)

// Leadership is one term of one leader: the lease it won, and the value it
// announced. The lease client keeps it alive until Resign, the loss of the
// lease, or the end of the lifetime context passed to Campaign
// (lease.WithLifetime). All methods are safe
// for concurrent use and on a nil *Leadership (which behaves as a term
// that has ended).
type Leadership struct {
	l     *lease.Lease
	value string
}

func (ld *Leadership) lease() *lease.Lease {
	if ld == nil {
		return nil
	}
	return ld.l
}

// Context returns a context canceled when the term ends, no later than the
// end of the lease's trust window. Its cause (context.Cause) is the lease's
// *lease.LostError: lease.ErrReleased after Resign, lease.ErrNotHeld,
// lease.ErrExpired or lease.ErrParentDone after a loss. It carries Holder
// for fence.HolderFromContext: do the leader's work with it.
func (ld *Leadership) Context() context.Context { return ld.lease().Context() }

// Done is Context().Done().
func (ld *Leadership) Done() <-chan struct{} { return ld.lease().Done() }

// Err returns nil while leading, and the *lease.LostError that ended the
// term afterwards.
func (ld *Leadership) Err() error { return ld.lease().Err() }

// Token returns the fencing token of this term: larger than every earlier
// term's. Present it to every sink the leader writes to as part of Holder.
func (ld *Leadership) Token() fence.Token { return ld.lease().Token() }

// OwnerID returns the owner id of this term's lease (fence.OwnerID), as
// Leader reports it to observers. The owner itself is in Holder, for the
// sinks only.
func (ld *Leadership) OwnerID() string { return fence.OwnerID(ld.lease().Holder().Owner) }

// Holder returns what the leader presents to every sink: the lease's
// holder, whose Scope is the election's lease name (see
// lease.Lease.Holder).
func (ld *Leadership) Holder() fence.Holder { return ld.lease().Holder() }

// String formats ld for people: the announced value, the term's token and
// owner id, never its owner, a write capability (docs/security.md).
func (ld *Leadership) String() string {
	if ld == nil {
		return "<nil>"
	}
	h := ld.Holder()
	return fmt.Sprintf("{Value:%q Scope:%q Token:%d OwnerID:%s}", ld.value, h.Scope, h.Token, fence.OwnerID(h.Owner))
}

// GoString is String, for fmt's %#v.
func (ld *Leadership) GoString() string {
	if ld == nil {
		return "(*election.Leadership)(nil)"
	}
	return "&election.Leadership" + ld.String()
}

// Format implements fmt.Formatter: %#v prints GoString, %q String quoted,
// every other verb (%d and %x included) String, so no verb prints the
// owner. A struct that keeps a *Leadership in an unexported field is
// printed by reflection, which calls no method: see fence.Holder.String.
func (ld *Leadership) Format(f fmt.State, verb rune) {
	ownerarg.FormatMasked(f, verb, ld.String(), ld.GoString())
}

// LogValue implements slog.LogValuer: the value, scope, token and
// owner_id, never the owner.
func (ld *Leadership) LogValue() slog.Value {
	if ld == nil {
		return slog.StringValue("<nil>")
	}
	h := ld.Holder()
	return slog.GroupValue(slog.String("value", ld.value), slog.String("scope", h.Scope),
		slog.Uint64("token", uint64(h.Token)), slog.String("owner_id", fence.OwnerID(h.Owner)))
}

// Value returns the value announced for this term.
func (ld *Leadership) Value() string {
	if ld == nil {
		return ""
	}
	return ld.value
}

// Lease returns the lease behind this term, for its Deadline and for test
// helpers (lease/leasetest).
func (ld *Leadership) Lease() *lease.Lease { return ld.lease() }

// Resign ends the term: it cancels Context with lease.ErrReleased, then
// releases the lease in one round trip, waking the waiting candidates.
// From then on observers see no leader until the next one announces
// itself. It is idempotent: every call returns the first call's result.
//
// Errors: as lease.Lease.Release; lease.ErrNotHeld when the term had
// already been lost.
func (ld *Leadership) Resign(ctx context.Context) error { return ld.lease().Release(ctx) }
