package ledgertest

import (
	"context"
	"time"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// The suite's holders are built before the slot they write is known
// (holder(n), perSlot(n)), so they carry a placeholder scope that the
// fixture's ledger replaces, per call, with the written slot's real one:
// unitMark becomes ledger.UnitScope of the slot's (job, partition),
// slotMark ledger.SlotScope of the slot. A Fence with any other Scope is
// passed through unchanged, so the cases on scopes themselves (scope.go's
// scopeCases) present exactly what they name. The marks hold a NUL byte:
// no job name or partition does.
const (
	unitMark = "\x00unit"
	slotMark = "\x00slot"
)

// scoped is the ledger under test with the placeholder scopes filled in.
type scoped struct{ ledger.Ledger }

// fill returns f with its placeholder scopes, and its Planner's, made s's.
func fill(s ledger.Slot, f ledger.Fence) ledger.Fence {
	switch f.Scope {
	case unitMark:
		f.Scope = ledger.UnitScope(s.Job, s.Partition)
	case slotMark:
		f.Scope = ledger.SlotScope(s)
	}
	if f.Planner != nil {
		p := fill(s, *f.Planner)
		f.Planner = &p
	}
	return f
}

func (l scoped) Begin(ctx context.Context, s ledger.Slot, f ledger.Fence, maxAttempts int, now time.Time) (int, int, error) {
	return l.Ledger.Begin(ctx, s, fill(s, f), maxAttempts, now)
}

func (l scoped) Heartbeat(ctx context.Context, s ledger.Slot, f ledger.Fence, attempt int, now time.Time) error {
	return l.Ledger.Heartbeat(ctx, s, fill(s, f), attempt, now)
}

func (l scoped) Finish(ctx context.Context, s ledger.Slot, f ledger.Fence, attempt int, o ledger.Outcome, now time.Time) error {
	return l.Ledger.Finish(ctx, s, fill(s, f), attempt, o, now)
}

func (l scoped) Skip(ctx context.Context, s ledger.Slot, f ledger.Fence, status ledger.Status, reason string, now time.Time) error {
	return l.Ledger.Skip(ctx, s, fill(s, f), status, reason, now)
}
