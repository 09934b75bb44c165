package ledger_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// Claim groups end at a slot's last unit and after about one unit in
// ClaimGroupSize, by the lease name alone.
func TestClaimGroupEnds(t *testing.T) {
	t.Parallel()
	at := time.Unix(1_800_000_000, 0)
	t.Run("AtTheLastUnitOfASlot", func(t *testing.T) {
		for i := range 100 {
			name := fmt.Sprintf("job|p%03d", i)
			require.True(t, ledger.ClaimGroupEnds(name, at, at.Add(time.Second)), name)
			require.True(t, ledger.ClaimGroupEnds(name, at, time.Time{}), name)
		}
	})
	t.Run("ByTheNameAlone", func(t *testing.T) {
		const n = 10_000
		ends := 0
		for i := range n {
			name := fmt.Sprintf("job%03d|p%03d", i/100, i%100)
			e := ledger.ClaimGroupEnds(name, at, at)
			require.Equal(t, e, ledger.ClaimGroupEnds(name, at.Add(time.Hour), at.Add(time.Hour)), name)
			if e {
				ends++
			}
		}
		mean := float64(n) / float64(ends)
		require.InDelta(t, ledger.ClaimGroupSize, mean, 4, "mean group size %.1f", mean)
	})
}
