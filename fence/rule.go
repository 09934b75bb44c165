package fence

import (
	"errors"
	"fmt"
	"time"
)

// ErrStaleToken matches every *StaleTokenError with errors.Is.
var ErrStaleToken = errors.New("fence: stale fencing token")

// ErrNoToken is returned by Check when the presented token is None (0).
// A write without a token is never accepted.
var ErrNoToken = errors.New("fence: no fencing token presented")

// ErrScopeMismatch matches a write a sink refused because what it writes
// is fenced under another scope (another lease) than the one presented,
// and the sink keeps one fence for it (pgfence's fenced rows:
// pgfence.ErrScopeMismatch wraps it). Comparing two leases' tokens would
// let a stale holder through, so the write is refused instead. It is as
// final as a stale token: no retry with the same scope can succeed, so
// the scheduler records such an attempt failed for good
// (ledger.ClassPermanent), never retried.
var ErrScopeMismatch = errors.New("fence: fenced under another scope")

// StaleTokenError reports a write refused by the acceptance rule: the
// presented token is below the current token of the resource's fence for
// its scope, or equal to it but presented by another owner. It matches
// ErrStaleToken with errors.Is.
type StaleTokenError struct {
	// Resource names what the write was for (a guard row, a key, a URL).
	Resource string
	// Scope is the scope of the fence that refused the write: the lease
	// name of the presented token (Holder.Scope). Current is that scope's
	// token; other scopes' fences of the resource played no part.
	Scope string
	// Presented is the token the writer sent.
	Presented Token
	// Current is the highest token the resource has accepted (None when
	// ClosedBefore is set: the scope's fence was deleted).
	Current Token
	// ClosedBefore is set when the write was refused because Scope is a
	// slot scope the sink has closed (SlotScopePruner): slots of its unit
	// before this instant (UTC, whole seconds) are closed, whatever the
	// token. The error then matches ErrScopeClosed too.
	ClosedBefore time.Time
}

// Error implements error.
func (e *StaleTokenError) Error() string {
	if !e.ClosedBefore.IsZero() {
		return fmt.Sprintf("fence: stale fencing token for %q (scope %q): the slot scope is closed, slots before %s are pruned (presented %d)",
			e.Resource, e.Scope, e.ClosedBefore.UTC().Format(time.RFC3339), e.Presented)
	}
	if e.Presented == e.Current {
		return fmt.Sprintf("fence: stale fencing token for %q (scope %q): token %d already used by another owner", e.Resource, e.Scope, e.Presented)
	}
	return fmt.Sprintf("fence: stale fencing token for %q (scope %q): presented %d, current %d", e.Resource, e.Scope, e.Presented, e.Current)
}

// Is makes errors.Is(err, ErrStaleToken) true, and errors.Is(err,
// ErrScopeClosed) when ClosedBefore is set.
func (e *StaleTokenError) Is(target error) bool {
	return target == ErrStaleToken || (target == ErrScopeClosed && !e.ClosedBefore.IsZero())
}

// ClosedScopeError returns the error of a write under a slot scope closed
// at before (unix seconds): a *StaleTokenError with ClosedBefore set.
func ClosedScopeError(resource string, h Holder, before int64) *StaleTokenError {
	closed := time.Unix(before, 0).UTC()
	if closed.IsZero() {
		// A watermark at 0001-01-01T00:00:00Z, which the zero time
		// stands for: reported a second later, so the error still says
		// it is a closed scope's (no slot lies in that second's way).
		closed = closed.Add(time.Second)
	}
	return &StaleTokenError{Resource: resource, Scope: h.Scope, Presented: h.Token, ClosedBefore: closed}
}

// Accept is the acceptance rule, for one fence: one (resource, scope).
// current and currentOwner are what the fence holds (None and "" for a resource never written); presented and
// owner come with the write. It reports whether the write is accepted:
// presented > current, or presented == current and owner == currentOwner.
// None is never accepted.
func Accept(current Token, currentOwner string, presented Token, owner string) bool {
	if presented == None {
		return false
	}
	return presented > current || (presented == current && owner == currentOwner)
}

// Check applies Accept for resource and returns nil when the write is
// accepted, ErrNoToken when presented is None, and a *StaleTokenError
// otherwise (Scope left empty: Holder.Check fills it in).
func Check(resource string, current Token, currentOwner string, presented Token, owner string) error {
	if presented == None {
		return fmt.Errorf("%w (resource %q)", ErrNoToken, resource)
	}
	if Accept(current, currentOwner, presented, owner) {
		return nil
	}
	return &StaleTokenError{Resource: resource, Presented: presented, Current: current}
}
