package scheduler

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/stretchr/testify/require"
)

func TestTriggerRunsAnExtraSlotOnce(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		var log runLog
		job := Job{Name: "adhoc", Spec: yearly, Run: func(ctx context.Context, run Run) error { log.add(run); return nil }}
		a := s.started(t, job)
		b := s.started(t, job)
		before := time.Now()
		slot, err := a.Trigger(context.Background(), "adhoc", "", "month-end rerun")
		require.NoError(t, err)
		require.Equal(t, "adhoc", slot.Job)
		require.Empty(t, slot.Partition)
		require.False(t, slot.At.Before(before.Truncate(time.Second)))
		require.False(t, slot.At.After(time.Now()))
		testwait.Until(t, 10*time.Second, "the triggered slot succeeded", func() bool {
			return s.status("adhoc", "", slot.At) == ledger.StatusSucceeded
		})
		require.NoError(t, a.Stop(context.Background()))
		require.NoError(t, b.Stop(context.Background()))

		runs := log.all()
		require.Len(t, runs, 1, "exactly once, on one replica")
		require.Equal(t, slot, runs[0].Slot)
		require.Equal(t, slot.Key(), runs[0].IdempotencyKey)
		rec := s.record(t, "adhoc", "", slot.At)
		require.Equal(t, "trigger: month-end rerun", rec.Reason)
		require.Equal(t, 1, rec.Attempt)
	})
}

// Backfill's from <= slot < to holds for bounds between seconds too.
func TestBackfillRangeOffWholeSeconds(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		slots := past(5, time.Minute)
		a := s.replica(t)
		require.NoError(t, a.Register(Job{Name: "reports", Spec: everySecond,
			Run: func(context.Context, Run) error { return nil }}))
		half := 500 * time.Millisecond
		got, err := a.Backfill(context.Background(), "reports", "", slots[1].Add(half), slots[4].Add(half), "")
		require.NoError(t, err)
		want := []ledger.Slot{{Job: "reports", At: slots[2]}, {Job: "reports", At: slots[3]}, {Job: "reports", At: slots[4]}}
		require.Equal(t, want, got, "from <= slot < to with from and to half a second past a slot")
	})
}

func TestBackfillRunsEachSlotOfTheRangeOnce(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		slots := past(5, 2*time.Second)
		var log runLog
		job := Job{
			Name: "reports", Spec: everySecond, StartAt: slots[0], EndAt: slots[4].Add(time.Second),
			Run: func(ctx context.Context, run Run) error { log.add(run); return nil },
		}
		a := s.replica(t)
		require.NoError(t, a.Register(job))
		claimNow(t, a, "reports", "", slots[4]) // the job's first run
		require.NoError(t, a.Start(context.Background()))
		b := s.started(t, job)

		got, err := a.Backfill(context.Background(), "reports", "", slots[1], slots[4], "late data")
		require.NoError(t, err)
		want := make([]ledger.Slot, 0, 3)
		for _, at := range slots[1:4] {
			want = append(want, ledger.Slot{Job: "reports", At: at})
		}
		require.Equal(t, want, got, "from <= slot < to")
		testwait.Until(t, 10*time.Second, "the backfilled slots succeeded", func() bool {
			for _, at := range slots[1:4] {
				if s.status("reports", "", at) != ledger.StatusSucceeded {
					return false
				}
			}
			return true
		})
		require.NoError(t, a.Stop(context.Background()))
		require.NoError(t, b.Stop(context.Background()))

		require.Equal(t, []time.Time{slots[4], slots[1], slots[2], slots[3]}, log.slots(), "each once, oldest first")
		for _, at := range slots[1:4] {
			rec := s.record(t, "reports", "", at)
			require.Equal(t, "backfill: late data", rec.Reason)
			require.Equal(t, 1, rec.Attempt)
		}
		require.Empty(t, s.status("reports", "", slots[0]), "outside the range")

		_, err = a.Backfill(context.Background(), "reports", "", slots[4].Add(-2*time.Hour), slots[0], "before StartAt")
		require.ErrorIs(t, err, ErrInvalidArgument, "nothing of the range inside the job's window")
		_, err = a.Backfill(context.Background(), "reports", "", slots[4], slots[1], "backwards")
		require.ErrorIs(t, err, ErrInvalidArgument, "from after to")
		_, err = a.Runs(context.Background(), "reports", "", slots[0], slots[4], 0)
		require.ErrorIs(t, err, ErrInvalidArgument, "limit 0")
	})
}

func TestRetryOfASucceededSlotIsANewAttemptOfTheSameRun(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		at := past(1, 0)[0]
		var log runLog
		sched := s.replica(t)
		require.NoError(t, sched.Register(Job{
			Name: "nightly", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second),
			Run: func(ctx context.Context, run Run) error { log.add(run); return nil },
		}))
		claimNow(t, sched, "nightly", "", at)
		require.NoError(t, sched.Start(context.Background()))
		// A time inside the slot's second names the slot.
		require.NoError(t, sched.Retry(context.Background(), "nightly", "", at.Add(300*time.Millisecond), "fixed the input"))
		testwait.Until(t, 10*time.Second, "the second attempt succeeded", func() bool {
			rec := s.record(t, "nightly", "", at)
			return rec.Attempt == 2 && rec.Status == ledger.StatusSucceeded
		})
		require.NoError(t, sched.Stop(context.Background()))

		runs := log.all()
		require.Len(t, runs, 2)
		require.Equal(t, 2, runs[1].Attempt)
		require.Equal(t, runs[0].IdempotencyKey, runs[1].IdempotencyKey, "the same logical run")
		rec := s.record(t, "nightly", "", at)
		require.Equal(t, "retry: fixed the input", rec.Reason)
		require.Len(t, rec.Attempts, 2)
		require.Equal(t, ledger.StatusSucceeded, rec.Attempts[0].Status)
		require.Equal(t, ledger.StatusSucceeded, rec.Attempts[1].Status)
	})
}

// An operator's Retry of a slot whose attempts are spent gives it a fresh
// budget: MaxAttempts more attempts, not one.
func TestRetryOfAnExhaustedSlotGetsAFreshBudget(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		at := past(1, 0)[0]
		var log runLog
		sched := s.replica(t)
		require.NoError(t, sched.Register(Job{
			Name: "import", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second),
			MaxAttempts: 2, RetryBackoff: time.Millisecond, RetryMaxBackoff: time.Millisecond,
			Run: func(ctx context.Context, run Run) error { log.add(run); return errors.New("upstream down") },
		}))
		claimNow(t, sched, "import", "", at) // attempt 1; Start's recovery claim and the retry wake-up do the rest
		require.NoError(t, sched.Start(context.Background()))
		testwait.Until(t, 10*time.Second, "the first budget spent", func() bool {
			rec := s.record(t, "import", "", at)
			return rec.Attempt == 2 && rec.Status == ledger.StatusFailed && rec.RetryAt.IsZero()
		})
		require.NoError(t, sched.Retry(context.Background(), "import", "", at, "upstream is back"))
		testwait.Until(t, 10*time.Second, "the second budget spent", func() bool {
			rec := s.record(t, "import", "", at)
			return rec.Attempt == 4 && rec.Status == ledger.StatusFailed && rec.RetryAt.IsZero()
		})
		require.NoError(t, sched.Stop(context.Background()))

		runs := log.all()
		require.Len(t, runs, 4, "2 attempts, then 2 more after the Retry")
		for i, r := range runs {
			require.Equal(t, i+1, r.Attempt)
		}
		rec := s.record(t, "import", "", at)
		require.Len(t, rec.Attempts, 4)
		for _, a := range rec.Attempts {
			require.Equal(t, ledger.StatusFailed, a.Status)
			require.Equal(t, ledger.ClassRetryable, a.Class)
		}
	})
}

func TestOperationsRejectBadTargets(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		run := func(context.Context, Run) error { return nil }
		sched := s.replica(t)
		require.NoError(t, sched.Register(Job{Name: "regional", Spec: everySecond, Partitions: []string{"eu", "us"}, Run: run}))
		require.NoError(t, sched.Register(Job{Name: "annual", Spec: yearly, Run: run}))
		now := time.Now()

		require.ErrorIs(t, sched.Retry(ctx, "annual", "", now, "x"), ErrInvalidArgument, "not a slot of the schedule")
		for _, target := range []struct{ job, partition string }{{"nope", ""}, {"regional", ""}, {"regional", "asia"}} {
			require.ErrorIs(t, sched.Retry(ctx, target.job, target.partition, now, "x"), ErrUnknownJob)
			_, err := sched.Trigger(ctx, target.job, target.partition, "x")
			require.ErrorIs(t, err, ErrUnknownJob)
			_, err = sched.Backfill(ctx, target.job, target.partition, now.Add(-time.Minute), now, "x")
			require.ErrorIs(t, err, ErrUnknownJob)
			_, err = sched.Runs(ctx, target.job, target.partition, time.Time{}, now, 10)
			require.ErrorIs(t, err, ErrUnknownJob)
		}
		_, err := sched.Backfill(ctx, "regional", "eu", now.Add(-2*time.Hour), now, "too much")
		require.ErrorIs(t, err, ErrInvalidArgument, "more than maxBackfill slots")
		require.ErrorIs(t, sched.Pause(ctx, "nope"), ErrUnknownJob)
		require.ErrorIs(t, sched.Resume(ctx, "nope", false), ErrUnknownJob)

		// A running slot cannot be asked for again until it ends.
		running := ledger.Slot{Job: "regional", At: now.Truncate(time.Second).UTC(), Partition: "eu"}
		_, _, err = s.ledger.Begin(ctx, running, ledger.Fence{Scope: "regional|eu", Token: 1, Owner: "holder"}, 3, now)
		require.NoError(t, err)
		require.ErrorIs(t, sched.Retry(ctx, "regional", "eu", running.At, "x"), ledger.ErrSlotRunning)
	})
}

func TestJobsAndRunsListForOperators(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		run := func(context.Context, Run) error { return nil }
		slots := past(3, time.Second)
		future := time.Now().Add(time.Hour).Truncate(time.Second).UTC()
		sched := s.replica(t)
		require.NoError(t, sched.Register(Job{Name: "listed", Spec: everySecond, StartAt: slots[0], EndAt: slots[2].Add(time.Second), Run: run}))
		require.NoError(t, sched.Register(Job{Name: "later", Spec: everySecond, StartAt: future, Run: run}))
		require.NoError(t, sched.Register(Job{Name: "annual", Spec: yearly, Zone: "Europe/Paris", Partitions: []string{"fr", "be"}, Run: run}))

		paris, err := time.LoadLocation("Europe/Paris")
		require.NoError(t, err)
		jobs := sched.Jobs()
		require.Len(t, jobs, 3)
		require.Equal(t, JobInfo{Name: "listed", Spec: everySecond, Zone: "UTC", Partitions: []string{""},
			EndAt: slots[2].Add(time.Second).UTC(), Ended: true}, jobs[0], "ended: no Next, and it says so")
		require.True(t, jobs[1].EndAt.IsZero(), "no EndAt")
		require.False(t, jobs[1].Ended)
		require.Equal(t, "later", jobs[1].Name)
		require.Equal(t, future, jobs[1].Next)
		require.Equal(t, "annual", jobs[2].Name)
		require.Equal(t, "Europe/Paris", jobs[2].Zone)
		require.Equal(t, []string{"fr", "be"}, jobs[2].Partitions)
		require.Equal(t, time.Date(time.Now().In(paris).Year()+1, 1, 1, 0, 0, 0, 0, paris).UTC(), jobs[2].Next)

		for _, at := range slots {
			claimNow(t, sched, "listed", "", at)
		}
		recs, err := sched.Runs(ctx, "listed", "", slots[0], slots[2].Add(time.Second), 10)
		require.NoError(t, err)
		require.Len(t, recs, 3)
		for i, at := range []time.Time{slots[2], slots[1], slots[0]} {
			require.Equal(t, at, recs[i].Slot.At, "newest first")
			require.Equal(t, ledger.StatusSucceeded, recs[i].Status)
		}
		recs, err = sched.Runs(ctx, "listed", "", slots[0], slots[2].Add(time.Second), 2)
		require.NoError(t, err)
		require.Equal(t, []time.Time{slots[2], slots[1]}, []time.Time{recs[0].Slot.At, recs[1].Slot.At}, "the newest, up to limit")
		recs, err = sched.Runs(ctx, "listed", "", slots[0], slots[2], 10)
		require.NoError(t, err)
		require.Len(t, recs, 2, "to is exclusive")
		recs, err = sched.Runs(ctx, "annual", "fr", time.Time{}, time.Now(), 10)
		require.NoError(t, err)
		require.Empty(t, recs)
	})
}

func TestJobStatusReadsPauseAndNewestRecords(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		slots := past(3, time.Second)
		sched := s.replica(t)
		require.NoError(t, sched.Register(Job{
			Name: "tenants", Spec: everySecond, StartAt: slots[0], EndAt: slots[2].Add(time.Second),
			Partitions: []string{"a", "b"}, MaxAttempts: 1, Overlap: OverlapBufferOne,
			Run: func(_ context.Context, run Run) error {
				if run.Slot.Partition == "b" {
					return errors.New("tenant b is down")
				}
				return nil
			},
		}))
		require.Equal(t, OverlapBufferOne, sched.Jobs()[0].Overlap)
		require.Equal(t, "buffer_one", sched.Jobs()[0].Overlap.String())

		st, err := sched.JobStatus(ctx, "tenants")
		require.NoError(t, err)
		require.WithinDuration(t, time.Now().Add(-time.Hour), st.Since, 5*time.Second, "counted from an hour ago")
		st.Since = time.Time{}
		require.Equal(t, JobStatus{}, st, "nothing ran yet")

		claimNow(t, sched, "tenants", "a", slots[0])
		claimNow(t, sched, "tenants", "a", slots[1])
		claimNow(t, sched, "tenants", "b", slots[2])
		require.NoError(t, sched.Pause(ctx, "tenants"))
		st, err = sched.JobStatus(ctx, "tenants")
		require.NoError(t, err)
		require.True(t, st.Paused)
		require.True(t, st.HasLast)
		require.Equal(t, ledger.Slot{Job: "tenants", At: slots[2], Partition: "b"}, st.Last.Slot)
		require.Equal(t, ledger.StatusFailed, st.Last.Status)
		require.True(t, st.HasSuccess)
		require.Equal(t, ledger.Slot{Job: "tenants", At: slots[1], Partition: "a"}, st.LastSuccess.Slot)
		require.Equal(t, ledger.StatusSucceeded, st.LastSuccess.Status)

		rec, found, err := sched.Record(ctx, "tenants", "b", slots[2].Add(300*time.Millisecond))
		require.NoError(t, err)
		require.True(t, found, "the slot of that second")
		require.Equal(t, "tenant b is down", rec.Attempts[0].Error)
		_, found, err = sched.Record(ctx, "tenants", "b", slots[0])
		require.NoError(t, err)
		require.False(t, found)
		_, _, err = sched.Record(ctx, "tenants", "c", slots[0])
		require.ErrorIs(t, err, ErrUnknownJob)
		_, err = sched.JobStatus(ctx, "nope")
		require.ErrorIs(t, err, ErrUnknownJob)

		// A ledger without PauseReader: the flag comes from State.
		plain := s.replica(t, func(c *Options) { c.Ledger = struct{ ledger.Ledger }{c.Ledger} })
		require.NoError(t, plain.Register(Job{Name: "tenants", Spec: everySecond, Partitions: []string{"a", "b"},
			Run: func(context.Context, Run) error { return nil }}))
		_, isReader := plain.cfg.Ledger.(ledger.PauseReader)
		require.False(t, isReader)
		st, err = plain.JobStatus(ctx, "tenants")
		require.NoError(t, err)
		require.True(t, st.Paused, "paused above, read through State")
		require.Equal(t, ledger.Slot{Job: "tenants", At: slots[2], Partition: "b"}, st.Last.Slot)
	})
}

func TestRedisDataLossDoesNotRerunForgottenSlots(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		slots := past(5, time.Second)
		var log runLog
		job := Job{
			Name: "amnesia", Spec: everySecond, StartAt: slots[0], EndAt: slots[4].Add(time.Second),
			Run: func(ctx context.Context, run Run) error { log.add(run); return nil },
		}
		before := s.replica(t)
		require.NoError(t, before.Register(job))
		for _, at := range slots[:4] {
			claimNow(t, before, "amnesia", "", at)
		}
		require.Equal(t, slots[:4], log.slots())

		// Redis restarts without persistence: the ledger forgot every
		// record, the last slot and the horizon.
		s.loseData(t)
		lostAt := time.Now()

		// An operator backfills the oldest slot after the loss. That
		// slot's record is new, but the slots between it and the loss are
		// before the ledger's new horizon: no catch-up re-runs them.
		after := s.replica(t)
		require.NoError(t, after.Register(job))
		require.NoError(t, after.Start(ctx))
		_, err := after.Backfill(ctx, "amnesia", "", slots[0], slots[1], "redo")
		require.NoError(t, err)
		testwait.Until(t, 10*time.Second, "the backfilled slot ran", func() bool {
			return s.status("amnesia", "", slots[0]) == ledger.StatusSucceeded
		})
		require.NoError(t, after.Stop(ctx))
		st, err := s.ledger.State(ctx, "amnesia", "", slots[0], time.Now())
		require.NoError(t, err)
		require.False(t, st.Horizon.Before(lostAt.Truncate(time.Millisecond)), "a new horizon: %v", st.Horizon)

		// A later slot's claim runs that slot only.
		claimNow(t, after, "amnesia", "", slots[4])
		require.Equal(t, append(append([]time.Time(nil), slots[:4]...), slots[0], slots[4]), log.slots())
		for _, at := range slots[1:4] {
			require.Empty(t, s.status("amnesia", "", at), "slot %v is not run again", at)
		}
	})
}

// A job name and a partition at their longest (ledger.MaxJobNameLen,
// ledger.MaxPartitionLen) give a Slot.Key of 270 bytes; the run's
// IdempotencyKey stays within httpfence.MaxKeyLen, so the HTTP sink takes
// it (ledger.Slot.IdempotencyKey).
func TestLongNamesGiveAnIdempotencyKeyTheHTTPSinkTakes(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		at := past(1, 0)[0]
		name, partition := strings.Repeat("j", ledger.MaxJobNameLen), strings.Repeat("p", ledger.MaxPartitionLen)
		var log runLog
		sched := s.replica(t)
		require.NoError(t, sched.Register(Job{
			Name: name, Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second), Partitions: []string{partition},
			Run: func(ctx context.Context, run Run) error { log.add(run); return nil },
		}))
		claimNow(t, sched, name, partition, at)
		runs := log.all()
		require.Len(t, runs, 1)
		slot := ledger.Slot{Job: name, At: at, Partition: partition}
		require.Len(t, slot.Key(), 270)
		require.Len(t, runs[0].IdempotencyKey, httpfence.MaxKeyLen)
		require.Equal(t, slot.IdempotencyKey(), runs[0].IdempotencyKey)
		header, err := httpfence.FormatKey(runs[0].IdempotencyKey)
		require.NoError(t, err)
		back, err := httpfence.ParseKey(header)
		require.NoError(t, err)
		require.Equal(t, runs[0].IdempotencyKey, back)
	})
}

// Under OverlapAllow a Prune takes a slot's own fence with its record and
// closes the slot (ledger.Pruner): Retry and Backfill refuse slots before
// the prune cutoff up front instead of asking for runs that cannot begin.
// Other policies still retry and backfill them.
func TestRetryAndBackfillRefuseClosedSlotsOfOverlapAllow(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		slots := past(5, ledger.PruneMargin+time.Minute) // a cutoff the ledger takes (ledger.PruneMargin)
		a := s.replica(t)
		noop := func(context.Context, Run) error { return nil }
		require.NoError(t, a.Register(Job{Name: "allow", Spec: everySecond, Overlap: OverlapAllow, Run: noop}))
		require.NoError(t, a.Register(Job{Name: "forbid", Spec: everySecond, Run: noop}))
		for _, job := range []string{"allow", "forbid"} { // a record each, so that Prune finds the pairs
			f := ledger.Fence{Scope: ledger.UnitScope(job, ""), Token: 1, Owner: "planner"}
			require.NoError(t, s.ledger.Skip(ctx, ledger.Slot{Job: job, At: slots[0]}, f, ledger.StatusSkipped, "old", slots[0]))
		}
		_, err := s.ledger.Prune(ctx, slots[2])
		require.NoError(t, err)

		err = a.Retry(ctx, "allow", "", slots[1], "")
		require.ErrorIs(t, err, ErrInvalidArgument)
		require.ErrorContains(t, err, "prune cutoff")
		_, err = a.Backfill(ctx, "allow", "", slots[1], slots[3], "")
		require.ErrorIs(t, err, ErrInvalidArgument)
		require.NoError(t, a.Retry(ctx, "allow", "", slots[3], ""), "at or after the cutoff")
		got, err := a.Backfill(ctx, "allow", "", slots[2], slots[4], "")
		require.NoError(t, err)
		require.Equal(t, []ledger.Slot{{Job: "allow", At: slots[2]}, {Job: "allow", At: slots[3]}}, got, "from the cutoff on")

		require.NoError(t, a.Retry(ctx, "forbid", "", slots[1], ""), "a unit-fenced job's pruned slot may run again")
	})
}
