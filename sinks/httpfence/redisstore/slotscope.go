package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/fencerule"
	"github.com/holdfast-go/holdfast/internal/luascript"
	"github.com/holdfast-go/holdfast/internal/ownerarg"
	"github.com/holdfast-go/holdfast/internal/prunecutoff"
	"github.com/holdfast-go/holdfast/internal/redispolicy"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
)

// The scripts of slot scopes (fence.SplitSlotScope): the Accept of one,
// and PruneSlotScopes. Both work on one unit hash.
var (
	//go:embed scripts/slotfence.lua
	slotFenceSrc    string
	slotFenceScript = luascript.New(fencerule.Lua, slotFenceSrc)

	//go:embed scripts/prune.lua
	pruneSrc    string
	pruneScript = luascript.New(prunecutoff.Lua, pruneSrc)
)

// Limits of PruneSlotScopes' arguments: they bound mistakes (a body passed
// for a name), far above any URL path or lease name. A unit as long as
// any scope Accept takes directly (the middleware's are at most
// httpfence.MaxScopeLen bytes) can be pruned.
const (
	maxUnitLen     = 1 << 20
	maxResourceLen = 1 << 20
)

// unitKey names the hash of (resource, unit) that holds the fences of
// unit's slot scopes and their watermark. Its hash input starts with '@',
// fenceKey's with a digit (the scope's length), so no (resource, unit)
// names the hash of a (resource, scope) pair, and the length prefix makes
// it injective among units as fenceKey's among scopes.
func unitKey(prefix, resource, unit string) string {
	return hashedKey(prefix, "@"+strconv.Itoa(len(unit))+":"+unit+":"+resource)
}

// acceptSlot is Accept for a slot scope of unit at slot: the slot's fence
// in the unit hash, refused as closed below its watermark.
func (f *Fence) acceptSlot(ctx context.Context, resource string, h fence.Holder, unit string, slot int64) error {
	res, err := slotFenceScript.Run(ctx, f.auto, []string{unitKey(f.prefix, resource, unit)},
		h.Token.String(), ownerarg.Owner(h.Owner), resource, unit, strconv.FormatInt(slot, 10)).Slice()
	if err != nil {
		return fmt.Errorf("httpfence: redis fence %q: %w", resource, redispolicy.MemoryFull(err))
	}
	return fenceOutcome(resource, h, res)
}

// fenceOutcome turns fence.lua's and slotfence.lua's replies into Accept's
// answer: {1} accepted, {0, current} refused by the rule, {2, closed}
// refused because the slot scope is closed.
func fenceOutcome(resource string, h fence.Holder, res []any) error {
	if len(res) == 1 {
		return nil
	}
	if len(res) != 2 {
		return fmt.Errorf("httpfence: redis fence %q: unexpected reply %v", resource, res)
	}
	s, ok := res[1].(string)
	if !ok {
		return fmt.Errorf("httpfence: redis fence %q: unexpected reply %v", resource, res)
	}
	if res[0] == int64(2) {
		closed, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return fmt.Errorf("httpfence: redis fence %q: stored watermark: %w", resource, err)
		}
		return fence.ClosedScopeError(resource, h, closed)
	}
	current, err := fence.ParseToken(s)
	if err != nil {
		return fmt.Errorf("httpfence: redis fence %q: stored token: %w", resource, err)
	}
	return &fence.StaleTokenError{Resource: resource, Scope: h.Scope, Presented: h.Token, Current: current}
}

// PruneSlotScopes implements fence.SlotScopePruner: in one script on the
// unit hash of (resource, unit), it raises the hash's watermark (field
// closed) to before (unix seconds, truncated; never lowered) and deletes
// the token:<slot> and owner:<slot> fields of slots below it, returning
// how many slots' fences it deleted. From then on Accept refuses a slot
// scope of unit below the watermark for resource with a
// *fence.StaleTokenError matching fence.ErrScopeClosed, whatever its
// token. The script's work is O(fields of the hash): prune regularly (at
// the scheduler ledger's prune cutoff or an older one) and the hash stays
// small. See the package documentation, "Pruning slot scopes".
//
// A before later than Redis's clock (TIME, read in the same script) minus
// fence.PruneMargin (1 hour) is refused first, with nothing changed (no
// watermark raised, no fence deleted): a watermark never goes down, and
// one in the future would close the slot scopes of runs still going, for
// good. The error wraps a *fence.PruneCutoffError naming the cutoff, the
// limit and Redis's clock (errors.As), and matches fence.ErrPruneCutoff
// (errors.Is). The caller's clock plays no part.
//
// Errors, before Redis is contacted: one matching
// httpfence.ErrInvalidOptions for a Fence not made by NewFence, an empty
// resource or unit, or one over 1 MiB; one matching idemstore.ErrNilContext for a nil ctx. Then those
// of the eviction-policy and format checks, as for the first Accept, the
// refused cutoff's, and Redis's, wrapped.
func (f *Fence) PruneSlotScopes(ctx context.Context, resource, unit string, before time.Time) (int, error) {
	if f == nil || f.auto == nil {
		return 0, fmt.Errorf("%w: redisstore.Fence not made by NewFence", httpfence.ErrInvalidOptions)
	}
	if ctx == nil {
		return 0, nilContext("Fence.PruneSlotScopes")
	}
	if err := validPrune(resource, unit); err != nil {
		return 0, err
	}
	if err := f.policy.Check(ctx); err != nil {
		return 0, fmt.Errorf("httpfence: redis prune slot scopes of %q: %w", resource, err)
	}
	if err := checkFormat(ctx, &f.format, f.auto, fenceName, f.prefix); err != nil {
		return 0, err
	}
	res, err := pruneScript.Run(ctx, f.auto, []string{unitKey(f.prefix, resource, unit)},
		strconv.FormatInt(before.Unix(), 10), resource, unit, prunecutoff.Micros(before), prunecutoff.Margin).Result()
	if err != nil {
		return 0, fmt.Errorf("httpfence: redis prune slot scopes of %q: %w", resource, redispolicy.MemoryFull(err))
	}
	switch v := res.(type) {
	case int64:
		return int(v), nil
	case []any: // Redis's clock: the cutoff is refused
		ce, err := prunecutoff.Refused(before, v)
		if err != nil {
			return 0, fmt.Errorf("httpfence: redis prune slot scopes of %q: unexpected reply: %w", resource, err)
		}
		return 0, fmt.Errorf("httpfence: redis prune slot scopes of %q: %w", resource, ce)
	}
	return 0, fmt.Errorf("httpfence: redis prune slot scopes of %q: unexpected reply %v (%T)", resource, res, res)
}

// validPrune checks PruneSlotScopes' resource and unit.
func validPrune(resource, unit string) error {
	switch {
	case resource == "":
		return fmt.Errorf("%w: redisstore.Fence.PruneSlotScopes: empty resource", httpfence.ErrInvalidOptions)
	case len(resource) > maxResourceLen:
		return fmt.Errorf("%w: redisstore.Fence.PruneSlotScopes: resource of %d bytes, limit %d", httpfence.ErrInvalidOptions, len(resource), maxResourceLen)
	case unit == "":
		return fmt.Errorf("%w: redisstore.Fence.PruneSlotScopes: empty unit", httpfence.ErrInvalidOptions)
	case len(unit) > maxUnitLen:
		return fmt.Errorf("%w: redisstore.Fence.PruneSlotScopes: unit of %d bytes, limit %d", httpfence.ErrInvalidOptions, len(unit), maxUnitLen)
	}
	return nil
}
