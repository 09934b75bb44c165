package fence

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
)

// ErrScopeClosed matches (errors.Is) a write a sink refused because its
// scope is a slot scope the sink has closed: the slot lies before the
// watermark PruneSlotScopes set for its unit (see SplitSlotScope). Every
// such error is a *StaleTokenError with ClosedBefore set, so it matches
// ErrStaleToken too: a holder of a pruned slot is stale whatever its token.
var ErrScopeClosed = errors.New("fence: slot scope closed")

// MaxSlotDigits is the most decimal digits the slot part of a slot scope
// may have (a sign aside): 15, enough for every Unix second of years
// -31,000,000 to 31,000,000, and exact in every store holdfast keeps
// fences in (Lua numbers, PostgreSQL bigint). A scope with a longer number
// is no slot scope.
const MaxSlotDigits = 15

// SlotScopeSep separates a slot scope's unit from its slot:
// "<unit>@<unix seconds>" (scheduler/ledger.SlotScope writes it).
const SlotScopeSep = "@"

// SplitSlotScope reports whether scope is a slot scope, "<unit>@<unix
// seconds>", the lease name of one slot of a scheduler job under
// OverlapAllow (scheduler/ledger.SlotScope), and returns its parts. The
// unit is everything before the last '@' and must not be empty; the slot
// is a canonical decimal integer (no '+', no leading zeros, "-" only
// before a non-zero number) of at most MaxSlotDigits digits. Every sink
// that closes slot scopes (PruneSlotScopes) parses scopes by this rule,
// in Go, Lua and SQL alike; a scope it does not match is never closed.
//
// Slot scopes share one namespace with every other lease name: a lease of
// your own named "U@123" is slot 123 of unit U to a sink, and closes when
// U's slots before it are pruned. The scheduler's job and partition names
// never hold '@', so its unit and slot scopes are never confused.
func SplitSlotScope(scope string) (unit string, at int64, ok bool) {
	i := strings.LastIndex(scope, SlotScopeSep)
	if i <= 0 {
		return "", 0, false
	}
	digits := scope[i+1:]
	neg := strings.HasPrefix(digits, "-")
	if neg {
		digits = digits[1:]
	}
	if digits == "" || len(digits) > MaxSlotDigits || (digits[0] == '0' && (len(digits) > 1 || neg)) {
		return "", 0, false
	}
	for j := 0; j < len(digits); j++ {
		if digits[j] < '0' || digits[j] > '9' {
			return "", 0, false
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return "", 0, false
	}
	if neg {
		n = -n
	}
	return scope[:i], n, true
}

// SlotScopePruner is a sink that can close the slot scopes of a unit
// (SplitSlotScope) and delete their fences, so that per-slot fences do not
// grow without bound under OverlapAllow (every slot's lease is a scope of
// its own). Implemented by redisfence.Writer, httpfence's redisstore.Fence
// and pgstore.Fence, and httpfencetest.MemoryFence; pgfence.Guard has the
// method with the database to work through as a second argument.
//
// PruneSlotScopes raises resource's watermark for unit to before
// (truncated to the second; a watermark never goes down) and deletes the
// fences of unit's slot scopes of slots before it, returning how many it
// deleted. From then on the sink refuses every write under such a scope,
// whatever its token, with a *StaleTokenError whose ClosedBefore is the
// watermark (it matches ErrStaleToken and ErrScopeClosed): a deleted
// fence never reopens to a stale holder of its slot. Slots at or after
// the watermark, unit itself and other units are untouched.
//
// Call it with the cutoff the scheduler's ledger prunes at (or an older
// one): a slot before it is over for the ledger too (its Backfill and
// Retry refuse it). A run of such a slot still going is refused from then
// on; pick a cutoff beyond any run's length.
//
// Since the watermark never goes down, a cutoff in the future (or from a
// caller whose clock is ahead) would close the scopes of runs still going,
// for good. So PruneSlotScopes refuses a before later than the store's own
// clock (Redis TIME, PostgreSQL now(), read in the same script or
// transaction that raises the watermark; never the caller's) minus
// PruneMargin (1 hour), as the scheduler's ledgers refuse such a cutoff,
// and changes nothing: no watermark raised, no fence deleted. Its error
// wraps a *PruneCutoffError (errors.As) naming the cutoff, the limit and
// the store's clock, and matches ErrPruneCutoff (errors.Is).
type SlotScopePruner interface {
	PruneSlotScopes(ctx context.Context, resource, unit string, before time.Time) (int, error)
}
