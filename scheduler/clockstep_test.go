package scheduler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// ranLog records the slots a job function ran, in order.
type ranLog struct {
	mu    sync.Mutex
	slots []time.Time
}

func (l *ranLog) run(_ context.Context, run scheduler.Run) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.slots = append(l.slots, run.At)
	return nil
}

func (l *ranLog) all() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.slots...)
}

func utc(hour, minute, sec int) time.Time {
	return time.Date(2026, 3, 2, hour, minute, sec, 0, time.UTC)
}

// Bug 1 (issue 12): a replica whose clock read 17:00 while true time was
// 15:00 ran slot 17:00; the clock was then corrected to 15:00:30. Before
// the fix it ran nothing until 17:01: its dispatcher slept until the fire
// it had computed from the previous one. Now the next fires are computed
// from the current clock: 15:01, 15:02 run once each.
func TestWallClockStepBackRunsTheNextFiresFromTheCurrentReading(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(16, 59, 30), func(t *testing.T, r *rig) {
		var log ranLog
		r.replica(0, scheduler.Job{Name: "minutely", Spec: "* * * * *", Run: log.run})
		r.tick(time.Minute, time.Second)
		require.Equal(t, []time.Time{utc(17, 0, 0)}, log.all())

		r.clk.Step(-2 * time.Hour)           // NTP: 17:00:30 -> 15:00:30
		r.tick(140*time.Second, time.Second) // to 15:02:50
		require.Equal(t, []time.Time{utc(17, 0, 0), utc(15, 1, 0), utc(15, 2, 0)}, log.all(),
			"after the step back, the fires follow the corrected clock")
		require.Equal(t, ledger.StatusSucceeded, r.record("minutely", utc(15, 2, 0)).Status)
	})
}

// After a step back the slot that already ran (the ledger has it) does not
// run again when the corrected clock reaches it.
func TestWallClockStepBackDoesNotRerunASlotTheLedgerHas(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(15, 2, 50), func(t *testing.T, r *rig) {
		var log ranLog
		r.replica(0, scheduler.Job{Name: "minutely", Spec: "* * * * *", Run: log.run})
		r.tick(20*time.Second, time.Second) // runs 15:03 at a clock 2.5 min fast
		r.clk.Step(-150 * time.Second)      // 15:03:10 -> 15:00:40
		r.tick(4*time.Minute, time.Second)  // to 15:04:40
		require.Equal(t, []time.Time{utc(15, 3, 0), utc(15, 1, 0), utc(15, 2, 0), utc(15, 4, 0)}, log.all(),
			"15:03 ran once, before the step")
		rec := r.record("minutely", utc(15, 3, 0))
		require.Len(t, rec.Attempts, 1)
	})
}

// Bug 2 (issue 12): slots that came due while the replica could not act
// follow Job.Missed exactly as after a restart. Before the fix a jump from
// 10:00:30 to 10:30:30 under MissedLatestOnly ran all 29 slots 10:01..10:29
// in a burst, then 10:30.
func TestForwardJumpOrFreezeFollowsTheMissedPolicy(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		move func(r *rig)
	}{
		// The process is frozen (SIGSTOP, VM suspend) for 30 min: its
		// timers fire late, all at once.
		{"Freeze", func(r *rig) { r.clk.Advance(30 * time.Minute); r.settle() }},
		// The wall clock jumps while the process runs.
		{"WallJump", func(r *rig) { r.clk.Step(30 * time.Minute); r.tick(time.Second, time.Second) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			onFakeTime(t, utc(9, 59, 50), func(t *testing.T, r *rig) {
				var log ranLog
				r.replica(0, scheduler.Job{Name: "latest", Spec: "* * * * *", Missed: scheduler.MissedLatestOnly, Run: log.run})
				r.tick(40*time.Second, time.Second) // to 10:00:30
				require.Equal(t, []time.Time{utc(10, 0, 0)}, log.all())
				tc.move(r)
				require.Equal(t, []time.Time{utc(10, 0, 0), utc(10, 30, 0)}, log.all(), "only the latest slot runs")
				for at, st := range r.statuses("latest", utc(10, 1, 0), utc(10, 29, 0), time.Minute) {
					require.Equal(t, ledger.StatusSkipped, st, "slot %v", at)
					require.Equal(t, "missed", r.record("latest", at).Reason)
				}
				r.tick(time.Minute, time.Second)
				require.Equal(t, utc(10, 31, 0), log.all()[2], "then on schedule again")
			})
		})
	}
}

// A per-second job frozen for 8 s: before the fix all 7 slots due during
// the freeze ran, 100 ms apart. Now they are missed: MissedSkip records
// them skipped and runs the slot due as the process resumes.
func TestFrozenPerSecondJobSkipsTheSlotsOfTheFreeze(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(12, 0, 0).Add(-500*time.Millisecond), func(t *testing.T, r *rig) {
		var log ranLog
		r.replica(0, scheduler.Job{Name: "fast", Spec: "* * * * * *", Missed: scheduler.MissedSkip, Run: log.run})
		r.tick(3*time.Second, 500*time.Millisecond) // to 12:00:02.5
		require.Equal(t, []time.Time{utc(12, 0, 0), utc(12, 0, 1), utc(12, 0, 2)}, log.all())
		r.clk.Advance(8 * time.Second) // SIGSTOP until 12:00:10.5
		r.settle()
		require.Equal(t, []time.Time{utc(12, 0, 0), utc(12, 0, 1), utc(12, 0, 2), utc(12, 0, 10)}, log.all())
		for at, st := range r.statuses("fast", utc(12, 0, 3), utc(12, 0, 9), time.Second) {
			require.Equal(t, ledger.StatusSkipped, st, "slot %v", at)
		}
	})
}
