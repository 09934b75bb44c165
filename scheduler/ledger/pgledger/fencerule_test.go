package pgledger_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/fencerule/fenceruletest"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// TestLedgerPassesTheRule runs fence's case table against the ledger's
// fences, raised by Skip and Begin: the pair's (unit scope, job_fences)
// and a slot's own (slot scope, job_slot_fences), up to math.MaxInt64 (the
// bigint column).
func TestLedgerPassesTheRule(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	now := time.Unix(1780000000, 0).UTC()
	slot := func(resource string) ledger.Slot { return ledger.Slot{Job: resource, At: now} }
	unit := func(resource string, h fence.Holder) ledger.Fence {
		return ledger.Fence{Scope: ledger.UnitScope(resource, ""), Token: h.Token, Owner: h.Owner}
	}
	t.Run("SkipUnit", func(t *testing.T) {
		t.Parallel()
		fenceruletest.Run(t, "skip-", math.MaxInt64, func(ctx context.Context, resource string, h fence.Holder) error {
			return l.Skip(ctx, slot(resource), unit(resource, h), ledger.StatusSkipped, "rule", now)
		})
	})
	t.Run("BeginUnit", func(t *testing.T) {
		t.Parallel()
		fenceruletest.Run(t, "begin-", math.MaxInt64, func(ctx context.Context, resource string, h fence.Holder) error {
			_, _, err := l.Begin(ctx, slot(resource), unit(resource, h), 100, now)
			return err
		})
	})
	t.Run("SkipSlot", func(t *testing.T) {
		t.Parallel()
		fenceruletest.Run(t, "slot-", math.MaxInt64, func(ctx context.Context, resource string, h fence.Holder) error {
			s := slot(resource)
			f := ledger.Fence{Scope: ledger.SlotScope(s), Token: h.Token, Owner: h.Owner}
			return l.Skip(ctx, s, f, ledger.StatusSkipped, "rule", now)
		})
	})
}
