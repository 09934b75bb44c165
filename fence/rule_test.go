package fence_test

import (
	"math"
	"testing"

	"github.com/holdfast-go/holdfast/internal/fencerule/fenceruletest"
)

// The Go rule passes the case table the Lua and SQL rules pass.
func TestAcceptPassesTheRuleTable(t *testing.T) {
	t.Parallel()
	fenceruletest.Run(t, "", math.MaxUint64, fenceruletest.Go())
}
