package ledgertest_test

import (
	"testing"

	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledgertest"
)

// TestMemory runs the suite against the reference ledger, a fresh one per
// subtest and one shared by all, which the suite's per-subtest job names
// must keep apart.
func TestMemory(t *testing.T) {
	t.Run("Fresh", func(t *testing.T) {
		t.Parallel()
		ledgertest.Exercise(t, func(*testing.T) scheduler.Ledger { return ledgertest.NewMemory() })
	})
	t.Run("Shared", func(t *testing.T) {
		t.Parallel()
		shared := ledgertest.NewMemory()
		ledgertest.Exercise(t, func(*testing.T) scheduler.Ledger { return shared })
	})
}
