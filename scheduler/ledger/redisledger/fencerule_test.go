package redisledger

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/fencerule/fenceruletest"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// ruleSlot is the slot the rule's cases write: job resource, no partition.
func ruleSlot(resource string) ledger.Slot {
	return ledger.Slot{Job: resource, At: time.Unix(1780000000, 0).UTC()}
}

// ruleFence is h as the unit fence of resource's slot.
func ruleFence(resource string, h fence.Holder) ledger.Fence {
	return ledger.Fence{Scope: ledger.UnitScope(resource, ""), Token: h.Token, Owner: h.Owner}
}

// TestRedisLedgerPassesTheRule runs fence's case table against the ledger's
// fence of (job, partition), raised by Skip (also on a slot's own fence), Begin and BeginIfClear (the
// three scripts that start with raise), on real Redis and miniredis, over
// the whole uint64 range.
func TestRedisLedgerPassesTheRule(t *testing.T) {
	t.Parallel()
	now := time.Unix(1780000000, 0).UTC()
	eachBackend(t, func(t *testing.T, s *setup) {
		t.Run("Skip", func(t *testing.T) {
			t.Parallel()
			fenceruletest.Run(t, "skip-", math.MaxUint64, func(ctx context.Context, resource string, h fence.Holder) error {
				return s.ledger.Skip(ctx, ruleSlot(resource), ruleFence(resource, h), ledger.StatusSkipped, "rule", now)
			})
		})
		t.Run("SkipSlot", func(t *testing.T) {
			t.Parallel()
			fenceruletest.Run(t, "slot-", math.MaxUint64, func(ctx context.Context, resource string, h fence.Holder) error {
				sl := ruleSlot(resource)
				f := ledger.Fence{Scope: ledger.SlotScope(sl), Token: h.Token, Owner: h.Owner}
				return s.ledger.Skip(ctx, sl, f, ledger.StatusSkipped, "rule", now)
			})
		})
		t.Run("Begin", func(t *testing.T) {
			t.Parallel()
			fenceruletest.Run(t, "begin-", math.MaxUint64, func(ctx context.Context, resource string, h fence.Holder) error {
				_, _, err := s.ledger.Begin(ctx, ruleSlot(resource), ruleFence(resource, h), 100, now)
				return err
			})
		})
		t.Run("BeginIfClear", func(t *testing.T) {
			t.Parallel()
			fenceruletest.Run(t, "claim-", math.MaxUint64, func(ctx context.Context, resource string, h fence.Holder) error {
				_, _, clear, err := beginIfClear(ctx, s.ledger, ruleSlot(resource), ruleFence(resource, h), 100, time.Time{}, time.Time{}, now)
				if err == nil && !clear {
					if _, err := checkFence(ruleSlot(resource), ruleFence(resource, h)); err != nil {
						return err // refused before Redis: not a claim
					}
					t.Errorf("%s: not clear", resource)
				}
				return err
			})
		})
	})
}
