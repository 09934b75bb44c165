package scheduler_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// An operator cannot ask for a slot the job does not have: before StartAt,
// at or after EndAt, or (Retry) not a fire of the schedule. Each would stay
// pending for ever, as the planner never runs it. Backfill clips its range
// to the window.
func TestOperationsRefuseSlotsOutsideTheJobWindow(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	onFakeTime(t, start, func(t *testing.T, r *rig) {
		ctx := context.Background()
		sched, err := scheduler.New(scheduler.Options{Leases: r.leases, Ledger: r.ledger, Clock: r.clk})
		require.NoError(t, err)
		from, to := start.Add(10*time.Second), start.Add(13*time.Second)
		require.NoError(t, sched.Register(scheduler.Job{Name: "bounded", Spec: "* * * * * *", StartAt: from, EndAt: to,
			Run: func(context.Context, scheduler.Run) error { return nil }}))
		require.NoError(t, sched.Register(scheduler.Job{Name: "hourly", Spec: "0 0 * * * *",
			Run: func(context.Context, scheduler.Run) error { return nil }}))

		for _, at := range []time.Time{from.Add(-time.Second), to, to.Add(time.Hour)} {
			err := sched.Retry(ctx, "bounded", "", at, "x")
			require.ErrorIs(t, err, scheduler.ErrInvalidArgument, "retry of %v outside [StartAt, EndAt)", at)
			require.Equal(t, ledger.Status(""), r.statuses("bounded", at, at, time.Second)[at], "nothing recorded at %v", at)
		}
		err = sched.Retry(ctx, "hourly", "", start.Add(time.Second), "x")
		require.ErrorIs(t, err, scheduler.ErrInvalidArgument, "not a fire of the schedule")
		require.NotErrorIs(t, err, scheduler.ErrInvalidJob, "an argument error, not a bad Job")
		require.ErrorContains(t, err, "is not a slot of")

		_, err = sched.Trigger(ctx, "bounded", "", "x")
		require.ErrorIs(t, err, scheduler.ErrInvalidArgument, "trigger before StartAt: the job has not started")
		require.ErrorContains(t, err, "has not started")

		for _, rg := range [][2]time.Time{{start, from}, {to, to.Add(time.Minute)}} {
			_, err := sched.Backfill(ctx, "bounded", "", rg[0], rg[1], "x")
			require.ErrorIs(t, err, scheduler.ErrInvalidArgument, "backfill of [%v, %v): nothing inside the window", rg[0], rg[1])
		}
		got, err := sched.Backfill(ctx, "bounded", "", start, to.Add(time.Minute), "late data")
		require.NoError(t, err)
		require.Equal(t, []ledger.Slot{{Job: "bounded", At: from}, {Job: "bounded", At: from.Add(time.Second)}, {Job: "bounded", At: from.Add(2 * time.Second)}},
			got, "clipped to [StartAt, EndAt)")
		require.Equal(t, map[time.Time]ledger.Status{
			from.Add(-time.Second): "", from: ledger.StatusPending, from.Add(time.Second): ledger.StatusPending,
			from.Add(2 * time.Second): ledger.StatusPending, to: "",
		}, r.statuses("bounded", from.Add(-time.Second), to, time.Second))
		require.Equal(t, "backfill: late data", r.record("bounded", from).Reason)

		r.clk.Advance(to.Sub(r.clk.Now()))
		_, err = sched.Trigger(ctx, "bounded", "", "x")
		require.ErrorIs(t, err, scheduler.ErrInvalidArgument, "trigger at EndAt: the job has ended")
		require.ErrorContains(t, err, "has ended")
		require.Equal(t, ledger.Status(""), r.statuses("bounded", to, to, time.Second)[to])
	})
}

// An operation without a reason records its name alone, without a
// dangling colon; a Trigger'd slot (an instant the schedule does not fire
// at) inside the window runs.
func TestOperationsWithoutAReasonRecordTheirName(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 2, 9, 0, 30, 0, time.UTC) // not a fire of the hourly schedule
	fire := start.Add(-30 * time.Second)
	onFakeTime(t, start, func(t *testing.T, r *rig) {
		ctx := context.Background()
		ran := make(chan time.Time, 4)
		sched := r.replica(0, scheduler.Job{Name: "adhoc", Spec: "0 0 * * * *", StartAt: start.Add(-time.Hour), EndAt: start.Add(time.Hour),
			Run: func(_ context.Context, run scheduler.Run) error { ran <- run.Slot.At; return nil }})
		slot, err := sched.Trigger(ctx, "adhoc", "", "")
		require.NoError(t, err)
		r.settle()
		require.Equal(t, slot.At, recv(t, ran), "the triggered slot ran")
		rec := r.record("adhoc", slot.At)
		require.Equal(t, ledger.StatusSucceeded, rec.Status)
		require.Equal(t, "trigger", rec.Reason)

		require.NoError(t, sched.Retry(ctx, "adhoc", "", fire, ""))
		r.settle()
		require.Equal(t, fire, recv(t, ran), "the retried slot ran")
		require.Equal(t, "retry", r.record("adhoc", fire).Reason)

		got, err := sched.Backfill(ctx, "adhoc", "", start.Add(-2*time.Hour), start, "")
		require.NoError(t, err)
		require.Equal(t, []ledger.Slot{{Job: "adhoc", At: fire}}, got, "clipped at StartAt: the 08:00 fire is before it")
		r.settle()
		require.Equal(t, fire, recv(t, ran), "the backfilled slot ran")
		require.Equal(t, "backfill", r.record("adhoc", fire).Reason)
	})
}

// recv returns the next value of c, failing the test after 10 s.
func recv[T any](t *testing.T, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		require.FailNow(t, "nothing received in 10 s")
		panic("unreachable")
	}
}

// Under OverlapForbid, a Trigger during a run is not skipped: it waits for
// the run's lease and runs after the run, while the scheduled slot that
// came due during the run is recorded skipped, reason "overlap".
func TestTriggerDuringARunIsNotSubjectToOverlapForbid(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(9, 59, 58), func(t *testing.T, r *rig) {
		g := newGated(r, utc(10, 0, 0))
		job := scheduler.Job{Name: "long", Spec: "* * * * *", Overlap: scheduler.OverlapForbid, Run: g.run}
		a := r.replica(0, job)
		r.replica(0, job)
		r.tick(32*time.Second, time.Second) // to 10:00:30, the 10:00 run held
		slot, err := a.Trigger(context.Background(), "long", "", "")
		require.NoError(t, err)
		require.Equal(t, utc(10, 0, 30), slot.At)
		r.tick(40*time.Second, time.Second) // to 10:01:10: 10:01 came due during the run
		g.release(t, utc(10, 0, 0))
		r.settle()
		r.tick(2*time.Second, time.Second) // the trigger's claim is tried again every second
		require.Equal(t, []time.Time{utc(10, 0, 0), utc(10, 0, 30)}, g.slots(), "the trigger ran after the run")
		require.Equal(t, ledger.StatusSucceeded, r.record("long", utc(10, 0, 30)).Status)
		skipped := r.record("long", utc(10, 1, 0))
		require.Equal(t, ledger.StatusSkipped, skipped.Status)
		require.Equal(t, "overlap", skipped.Reason)
	})
}
