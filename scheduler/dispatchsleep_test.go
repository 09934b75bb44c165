package scheduler_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// movesOnRead is the rig's fake clock, moved on by a second right after
// the first reading once armed: the clock moving between the dispatcher's
// reading of the time and the arming of its timer.
type movesOnRead struct {
	*clock.Fake
	armed atomic.Bool
}

func (m *movesOnRead) Now() time.Time {
	t := m.Fake.Now()
	if m.armed.CompareAndSwap(true, false) {
		m.Fake.Advance(time.Second)
	}
	return t
}

// A fire that comes due while the dispatcher starts the claims of the ones
// before it is claimed at once: the dispatcher sleeps until the next head
// counted from when it arms its timer. Counted from its earlier reading,
// the timer was set a step too late and the due fire waited for it (on a
// fake clock for ever: the replica never settled).
func TestAFireDueWhileTheDispatcherTriggersIsNotLate(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(10, 0, 0), func(t *testing.T, r *rig) {
		clk := &movesOnRead{Fake: r.clk}
		job := scheduler.Job{Name: "tick", Spec: "* * * * * *", Run: func(context.Context, scheduler.Run) error { return nil }}
		r.replicaWith(0, func(o *scheduler.Options) { o.Clock = clk }, job)
		r.tick(2*time.Second, time.Second) // to 10:00:02, settled

		// The 10:00:03 fire wakes the dispatcher; its first reading moves
		// the clock to 10:00:04, when the next fire is due.
		clk.armed.Store(true)
		r.clk.Advance(time.Second)
		require.NoError(t, testwait.Poll(10*time.Second, 100*time.Microsecond, func() error {
			if clk.armed.Load() {
				return errors.New("the dispatcher has not read the clock yet")
			}
			return nil
		}))
		r.settle()
		require.Equal(t, utc(10, 0, 4), r.clk.Now())
		for _, at := range []time.Time{utc(10, 0, 3), utc(10, 0, 4)} {
			require.Equal(t, ledger.StatusSucceeded, r.record("tick", at).Status, "the fire of %v", at)
		}
	})
}
