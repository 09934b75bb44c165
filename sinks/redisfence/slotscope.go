package redisfence

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/prunecutoff"
)

var _ fence.SlotScopePruner = (*Writer)(nil)

// maxWatermark bounds the watermarks PruneSlotScopes stores, in unix
// seconds: 10^15, one above the largest slot a slot scope can name
// (fence.MaxSlotDigits digits). A before below -maxWatermark is stored as
// -maxWatermark, which closes the same slots (none), and every stored
// watermark is an exact Lua number. A before above +maxWatermark is
// refused as any cutoff later than the server's clock minus
// fence.PruneMargin.
const maxWatermark = 1_000_000_000_000_000

// PruneSlotScopes implements fence.SlotScopePruner: in one script on
// FenceKey(resource), it raises resource's watermark for unit, the hash
// field "closed:<unit>", to before (unix seconds, before.Unix(); never
// lowered), then deletes the fences (fields "token:<s>" and "owner:<s>")
// of every slot scope s of unit (fence.SplitSlotScope) whose slot is
// below the watermark, and returns how many it deleted. From then on Set,
// HSet and Eval refuse every write under such a scope, whatever its token,
// with fence.ClosedScopeError: a *fence.StaleTokenError whose ClosedBefore
// is the watermark, matching fence.ErrStaleToken and fence.ErrScopeClosed.
// Slots at or after the watermark, unit's own scope, other units and
// scopes that are no slot scopes ("U@0042") are untouched. See "Pruning
// slot scopes" in the package documentation for the cutoff to use.
//
// A before later than Redis's clock (TIME, read in the same script) minus
// fence.PruneMargin (1 hour) is refused first, with nothing changed (no
// watermark raised, no fence deleted): a watermark never goes down, and
// one in the future would close the scopes of runs still going, for good.
// The error wraps a *fence.PruneCutoffError naming the cutoff, the limit
// and Redis's clock (errors.As), and matches fence.ErrPruneCutoff
// (errors.Is). The caller's clock plays no part.
//
// resource is validated as for writes (ErrInvalidKey, ErrReservedKey, a
// hash tag on Cluster) and unit must not be empty (ErrInvalidUnit), both
// before Redis is contacted. A resource never written gets a fence key
// holding the watermark alone: its pruned slots are closed too. The
// script walks the whole fence hash (HKEYS): O(fields), which pruning
// keeps bounded. Redis errors are wrapped as for writes; running it again
// is safe.
func (w *Writer) PruneSlotScopes(ctx context.Context, resource, unit string, before time.Time) (int, error) {
	if err := w.ready(ctx); err != nil {
		return 0, err
	}
	if err := w.validateKey(resource); err != nil {
		return 0, err
	}
	if unit == "" {
		return 0, fmt.Errorf("%w: empty (resource %q)", ErrInvalidUnit, resource)
	}
	if err := w.checkPolicy(ctx); err != nil {
		return 0, err
	}
	watermark := min(max(before.Unix(), -maxWatermark), maxWatermark)
	res, err := pruneScript.Run(ctx, w.auto, []string{FenceKey(resource)}, unit, strconv.FormatInt(watermark, 10),
		prunecutoff.Micros(before), prunecutoff.Margin).Result()
	if err != nil {
		return 0, wrapRedisError(ctx, "prune slot scopes of", resource, err)
	}
	return pruneOutcome(resource, before, res)
}

// pruneOutcome turns prune.lua's reply into PruneSlotScopes' answer: the
// number of fences deleted, or Redis's clock {seconds, microseconds} when
// the cutoff was refused.
func pruneOutcome(resource string, before time.Time, res any) (int, error) {
	switch v := res.(type) {
	case int64:
		return int(v), nil
	case []any:
		ce, err := prunecutoff.Refused(before, v)
		if err != nil {
			return 0, fmt.Errorf("%w: prune slot scopes of %q: %w", ErrUnexpectedReply, resource, err)
		}
		return 0, fmt.Errorf("redisfence: prune slot scopes of %q: %w", resource, ce)
	}
	return 0, fmt.Errorf("%w: prune slot scopes of %q: %v (%T)", ErrUnexpectedReply, resource, res, res)
}

// closedOutcome is a write script's refusal {2, watermark}: h's scope is
// a slot scope closed below watermark (fence.lua).
func closedOutcome(key string, h fence.Holder, watermark any) error {
	s, ok := watermark.(string)
	if !ok {
		return fmt.Errorf("%w: watermark %v (%T) for %q", ErrUnexpectedReply, watermark, watermark, key)
	}
	before, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: watermark for %q: %w", ErrUnexpectedReply, key, err)
	}
	return fence.ClosedScopeError(key, h, before)
}
