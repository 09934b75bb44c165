package scheduler_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// StartAt and EndAt need not fall on whole seconds: the job has exactly the
// slots of its spec in [StartAt, EndAt), StartAt included and EndAt
// excluded, whatever their fraction of a second. Three replicas share each
// ledger (on Redis the ledger and the leases share one client, so the
// joined claim runs); every slot in the window runs once, none outside it.
func TestFakeTimeStartAtAndEndAtOffWholeSeconds(t *testing.T) {
	t.Parallel()
	ms := func(sec, milli int) time.Time { return utc(10, 0, sec).Add(time.Duration(milli) * time.Millisecond) }
	for _, tc := range []struct {
		name           string
		startAt, endAt time.Time
		want           []time.Time
	}{
		// The bench's case: one slot, 06, inside [05.4, 06.4).
		{"BothOff", ms(5, 400), ms(6, 400), []time.Time{utc(10, 0, 6)}},
		{"StartOffEndOnASlot", ms(5, 400), utc(10, 0, 7), []time.Time{utc(10, 0, 6)}},
		{"StartOnASlotEndOff", utc(10, 0, 5), ms(6, 400), []time.Time{utc(10, 0, 5), utc(10, 0, 6)}},
		// StartAt on a slot has it, EndAt on a slot has not.
		{"BothOnSlots", utc(10, 0, 5), utc(10, 0, 7), []time.Time{utc(10, 0, 5), utc(10, 0, 6)}},
		// Just after a slot does not have it; just after one does.
		{"StartJustAfterEndJustAfter", ms(5, 1), ms(7, 1), []time.Time{utc(10, 0, 6), utc(10, 0, 7)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			onFakeTime(t, ms(3, 700), func(t *testing.T, r *rig) {
				g := newGated(r)
				job := scheduler.Job{Name: "bounded", Spec: "* * * * * *", StartAt: tc.startAt, EndAt: tc.endAt, Run: g.run}
				for range 3 {
					r.replica(0, job)
				}
				r.tick(6*time.Second, 100*time.Millisecond) // to 10:00:09.7
				require.Equal(t, tc.want, g.slots(), "each slot of [StartAt, EndAt) once, in order")
				for at := utc(10, 0, 3); !at.After(utc(10, 0, 9)); at = at.Add(time.Second) {
					rec, found, err := r.ledger.Get(t.Context(), ledger.Slot{Job: "bounded", At: at})
					require.NoError(t, err)
					if !slices.ContainsFunc(tc.want, at.Equal) {
						require.False(t, found, "slot %v is outside [StartAt, EndAt): %+v", at, rec)
						continue
					}
					require.True(t, found, "no record of the slot %v", at)
					require.Equal(t, ledger.StatusSucceeded, rec.Status, "slot %v", at)
					require.Equal(t, 1, rec.Attempt, "slot %v", at)
				}
			})
		})
	}
}
