package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler/cron"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// A replica that found the lease held at three fires (another holder's,
// which never ran them: cut off from Redis, seed 33 of the simulator)
// and then finds the ledger reset plans those three too: they have no
// record it ever saw, so each is recorded skipped with reasonRecordLost,
// not run again (their holder may have run them), and the slots after
// them follow the missed-slot policy. Before the fix, the plan started
// after the last fire found held, and the three were left with neither
// an effect nor a record.
func TestResetRecordsSlotsFoundHeldAsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	job := planJob(t, Job{Spec: everySecond, MaxCatchUp: 10})
	u := &unit{job: job}
	s := &Scheduler{}
	// Before the loss: slot 0 recorded (read back or written here), the
	// fires of 1..3 found held by another replica, horizon t0 - 1 h.
	u.mem.horizon = instantOf(t0.Add(-time.Hour))
	s.noteSure(u, sec(0), true)
	for i := 1; i <= 3; i++ {
		s.noteSure(u, sec(i), false)
	}
	now := sec(6)
	// The ledger lost its data: a new horizon, no last slot.
	st, gap, found := s.rememberState(u, ledger.State{Horizon: sec(5)}, now)
	require.NotNil(t, found, "a reset is found")
	require.Equal(t, sec(3), gap, "the gap of slots nobody is known to have run starts after the last fire found held")
	require.Equal(t, sec(0), st.Last, "the plan looks from the last slot this replica saw recorded")
	attrs := map[string]any{}
	for _, a := range found {
		attrs[a.Key] = a.Value.Any()
	}
	require.Equal(t, sec(0), attrs["unknown_after"], "ledger_reset names the range of unknown outcome")

	cs := newClaimState(sec(6))
	cs.lostTo = gap
	p := planClaim(job, st, cs, cron.Fire{}, now)
	require.Equal(t, []string{
		"10:00:01 skipped: " + reasonRecordLost,
		"10:00:02 skipped: " + reasonRecordLost,
		"10:00:03 skipped: " + reasonRecordLost,
		"10:00:04 run",
		"10:00:05 run",
		"10:00:06 run",
	}, stepStrings(p.steps))

	// Carried out, the gap and its unknown range are forgotten.
	s.planDone(u, gap)
	st, gap, found = s.rememberState(u, ledger.State{Horizon: sec(5), Last: sec(6)}, sec(7))
	require.Nil(t, found)
	require.True(t, gap.IsZero())
	require.Equal(t, sec(6), st.Last)
}

// A plan of a reset's gap leaves alone the slots before the ledger's prune
// cutoff (State.Pruned: their records may be pruned since another replica
// planned them). The simulator found a replica that planned a gap 80 s
// after the reset and recorded "skipped" over pruned succeeded slots (seed
// 264). Without the rule, the plan lists them.
func TestResetGapLeavesPrunedSlots(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	sec := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Second) }
	job := planJob(t, Job{Spec: everySecond, MaxCatchUp: 100})
	st := ledger.State{Last: sec(0), Horizon: t0.Add(-time.Hour)} // the gap's State (rememberState)
	plan := func(cs *claimState) []string { return stepStrings(planClaim(job, st, cs, cron.Fire{}, sec(8)).steps) }

	cs := newClaimState(sec(8))
	require.Equal(t, []string{"10:00:01 run", "10:00:02 run", "10:00:03 run", "10:00:04 run",
		"10:00:05 run", "10:00:06 run", "10:00:07 run", "10:00:08 run"}, plan(cs), "no history: the whole gap")

	cs = newClaimState(sec(8))
	cs.prunedTo = sec(3) // records before 10:00:03 may be pruned
	require.Equal(t, []string{"10:00:03 run", "10:00:04 run", "10:00:05 run", "10:00:06 run",
		"10:00:07 run", "10:00:08 run"}, plan(cs))
}
