package fence

import (
	"errors"
	"fmt"
	"time"
)

// PruneMargin is how far behind the store's clock a prune cutoff must be
// (1 hour). Every holdfast store that prunes under a cutoff that never goes
// down refuses a cutoff later than its own clock (Redis TIME, PostgreSQL
// now()) minus PruneMargin with a *PruneCutoffError, changing nothing:
// SlotScopePruner.PruneSlotScopes, whose watermark closes the slot scopes
// of a unit below it for good, and the scheduler ledger's Prune and
// PrunePreview (scheduler/ledger.PruneMargin is this constant), whose
// cutoff closes the slots before it. A cutoff in the future, or one from a
// caller whose clock is ahead, would otherwise close slots whose runs may
// still begin or still be going. The hour covers what may still begin a
// slot after its instant (a late timer, a replica waiting out a crashed
// holder's lease, the skew between the caller's clock and the store's),
// all far below an hour when the system is healthy. It is no retention to
// aim at: prune at the ledger's cutoff (docs/operations.md, "Retention and
// growth").
const PruneMargin = time.Hour

// ErrPruneCutoff is matched (errors.Is) by every *PruneCutoffError.
var ErrPruneCutoff = errors.New("holdfast: prune cutoff too recent")

// PruneCutoffError is the error of a prune (SlotScopePruner.PruneSlotScopes,
// a scheduler ledger's Prune or PrunePreview) whose cutoff Before is later
// than Limit, the store's clock Now minus Margin. Nothing was pruned and no
// watermark raised. It matches ErrPruneCutoff.
type PruneCutoffError struct {
	Before time.Time     // the cutoff asked for
	Limit  time.Time     // the latest cutoff allowed: Now - Margin
	Now    time.Time     // the store's clock when the cutoff was checked
	Margin time.Duration // PruneMargin (a test store's may be its own)
}

func (e *PruneCutoffError) Error() string {
	return fmt.Sprintf("holdfast: prune cutoff %s is later than %s (the store's clock %s minus %v): it would close slots that may still run; nothing pruned",
		e.Before.UTC().Format(time.RFC3339), e.Limit.UTC().Format(time.RFC3339), e.Now.UTC().Format(time.RFC3339), e.Margin)
}

// Is reports whether target is ErrPruneCutoff.
func (e *PruneCutoffError) Is(target error) bool { return target == ErrPruneCutoff }

// CheckPruneCutoff returns a *PruneCutoffError if before is later than now
// minus PruneMargin, nil otherwise. Stores call it with their own clock
// (Redis TIME, PostgreSQL now()), never the caller's.
func CheckPruneCutoff(before, now time.Time) error {
	return CheckPruneCutoffMargin(before, now, PruneMargin)
}

// CheckPruneCutoffMargin is CheckPruneCutoff with a margin of the caller's:
// that of a store in memory, which a simulation shortens
// (scheduler/ledger/ledgertest.Memory.SetPruneMargin,
// sinks/httpfence/httpfencetest.MemoryFence.SetPruneMargin). A store that
// real schedulers share uses PruneMargin.
func CheckPruneCutoffMargin(before, now time.Time, margin time.Duration) error {
	if limit := now.Add(-margin); before.After(limit) {
		return &PruneCutoffError{Before: before, Limit: limit, Now: now, Margin: margin}
	}
	return nil
}
