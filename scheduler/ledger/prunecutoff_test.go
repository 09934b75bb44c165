package ledger

import (
	"errors"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/fence"
)

// The ledger's prune cutoff names are fence's: a ledger's refusal and a
// sink's PruneSlotScopes refusal match both sentinels and both types.
func TestPruneCutoffIsFences(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	if PruneMargin != fence.PruneMargin {
		t.Fatalf("PruneMargin %v, fence.PruneMargin %v", PruneMargin, fence.PruneMargin)
	}
	for _, err := range []error{CheckPruneCutoff(now, now), fence.CheckPruneCutoff(now, now), CheckPruneCutoffMargin(now, now, time.Minute)} {
		var ce *fence.PruneCutoffError
		var le *PruneCutoffError
		if !errors.Is(err, ErrPruneCutoff) || !errors.Is(err, fence.ErrPruneCutoff) || !errors.As(err, &ce) || !errors.As(err, &le) || ce != le {
			t.Fatalf("%v (%T): want a *fence.PruneCutoffError matching both sentinels", err, err)
		}
	}
	if err := CheckPruneCutoff(now.Add(-PruneMargin), now); err != nil {
		t.Fatalf("a cutoff at the limit: %v", err)
	}
}
