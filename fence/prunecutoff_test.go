package fence_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
)

// A cutoff up to the store's now minus the margin passes; a nanosecond
// later is refused with a *PruneCutoffError that names the cutoff, the
// limit, the store's clock and the margin, and matches ErrPruneCutoff
// through wrapping.
func TestCheckPruneCutoff(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	limit := now.Add(-fence.PruneMargin)
	require.Equal(t, time.Hour, fence.PruneMargin)
	for _, ok := range []time.Time{limit, limit.Add(-time.Nanosecond), time.Unix(0, 0), {}} {
		require.NoError(t, fence.CheckPruneCutoff(ok, now), "%v", ok)
	}
	for _, late := range []time.Time{limit.Add(time.Nanosecond), now, now.Add(24 * time.Hour)} {
		err := fmt.Errorf("sink: %w", fence.CheckPruneCutoff(late, now))
		require.ErrorIs(t, err, fence.ErrPruneCutoff, "%v", late)
		var ce *fence.PruneCutoffError
		require.ErrorAs(t, err, &ce)
		require.Equal(t, fence.PruneCutoffError{Before: late, Limit: limit, Now: now, Margin: fence.PruneMargin}, *ce)
	}
	err := fence.CheckPruneCutoff(now, now)
	require.Equal(t, "holdfast: prune cutoff 2026-12-01T12:00:00Z is later than 2026-12-01T11:00:00Z (the store's clock 2026-12-01T12:00:00Z minus 1h0m0s): it would close slots that may still run; nothing pruned", err.Error())
	require.False(t, errors.Is(err, fence.ErrStaleToken))

	// A margin of the caller's (a store in memory, shortened for a simulation).
	require.NoError(t, fence.CheckPruneCutoffMargin(now.Add(-time.Minute), now, time.Minute))
	var ce *fence.PruneCutoffError
	require.ErrorAs(t, fence.CheckPruneCutoffMargin(now.Add(-time.Second), now, time.Minute), &ce)
	require.Equal(t, time.Minute, ce.Margin)
	require.Equal(t, now.Add(-time.Minute), ce.Limit)
}
