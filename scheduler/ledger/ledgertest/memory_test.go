package ledgertest_test

import (
	"testing"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/ledgertest"
)

// TestMemory runs the suite against the reference ledger, a fresh one per
// subtest and one shared by all, which the suite's per-subtest job names
// must keep apart.
func TestMemory(t *testing.T) {
	t.Run("Fresh", func(t *testing.T) {
		t.Parallel()
		ledgertest.Exercise(t, func(*testing.T) ledger.Ledger { return ledgertest.NewMemory() })
	})
	t.Run("Shared", func(t *testing.T) {
		t.Parallel()
		shared := ledgertest.NewMemory()
		ledgertest.Exercise(t, func(*testing.T) ledger.Ledger { return shared })
	})
}
