package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/scheduler/cron"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
)

func TestLateTimerDoesNotRerunSlot(t *testing.T) {
	t.Parallel()
	t.Run("Succeeded", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			at := past(1, 0)[0]
			var log runLog
			job := Job{
				Name: "late", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second),
				Run: func(ctx context.Context, run Run) error { log.add(run); return nil },
			}
			a := s.replica(t)
			require.NoError(t, a.Register(job))
			claimNow(t, a, "late", "", at)
			require.Equal(t, ledger.StatusSucceeded, s.status("late", "", at))
			before := s.record(t, "late", "", at)

			// Replica b's timer for the same slot fires late: b computes
			// the same Fire from the schedule and claims it. So does a
			// restarted a.
			b := s.replica(t)
			require.NoError(t, b.Register(job))
			claimNow(t, b, "late", "", at)
			restarted := s.replica(t)
			require.NoError(t, restarted.Register(job))
			claimNow(t, restarted, "late", "", at)

			require.Equal(t, []time.Time{at}, log.slots(), "the slot ran once")
			require.Equal(t, before, s.record(t, "late", "", at), "the record is untouched")
		})
	})
	t.Run("FailedAwaitingItsRetry", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			at := past(1, 0)[0]
			var log runLog
			job := Job{
				Name: "late-retry", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second),
				RetryBackoff: time.Minute,
				Run:          func(ctx context.Context, run Run) error { log.add(run); return errors.New("down") },
			}
			a := s.replica(t)
			require.NoError(t, a.Register(job))
			claimNow(t, a, "late-retry", "", at)
			rec := s.record(t, "late-retry", "", at)
			require.Equal(t, ledger.StatusFailed, rec.Status)
			require.True(t, rec.RetryAt.After(time.Now()), "retry at %v", rec.RetryAt)

			// Another replica's timer fires late for the same slot: the
			// stored retry time holds, whoever claims.
			b := s.replica(t)
			require.NoError(t, b.Register(job))
			claimNow(t, b, "late-retry", "", at)
			require.Equal(t, 1, log.count("", at), "no attempt before RetryAt")
			require.Equal(t, rec, s.record(t, "late-retry", "", at))
		})
	})
}

func TestSlotDueWhileTheHolderReleasesIsNotLost(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		startAt, endAt, slots := slotWindow(2)
		var log runLog
		run := func(ctx context.Context, run Run) error { log.add(run); return nil }
		// b's timer fires for slots[1] only, while a still holds the lease
		// from its claim of slots[0]: b skips, leaving the slot to a.
		bSkipped := make(chan struct{})
		var once sync.Once
		b := s.replica(t, logTo(func(msg string, attrs map[string]string) {
			if msg == "job_claim_skipped" && attrs["reason"] == "lease_held" {
				once.Do(func() { close(bSkipped) })
			}
		}))
		require.NoError(t, b.Register(Job{Name: "edge", Spec: everySecond, StartAt: slots[1], EndAt: endAt, Run: run}))
		// a's last look at the ledger in its claim of slots[0] waits until
		// b skipped slots[1]: the slot came due after a's run, while a was
		// between its run and its release.
		// (If the dispatcher's order made call 2 another claim, the wait
		// ends with the test rather than holding a's Stop for ever.)
		testDone := make(chan struct{})
		watch := &watchedLedger{onState: func(call int) {
			if call == 2 {
				select {
				case <-bSkipped:
				case <-testDone:
				}
			}
		}}
		a := s.replica(t, watched(watch))
		t.Cleanup(func() { close(testDone) }) // before the replicas' Stop (cleanups run last-in first-out)
		require.NoError(t, a.Register(Job{Name: "edge", Spec: everySecond, StartAt: startAt, EndAt: endAt, Run: run}))
		require.NoError(t, a.Start(context.Background()))
		require.NoError(t, b.Start(context.Background()))
		testwait.Until(t, 10*time.Second, "both slots succeeded", func() bool {
			return s.status("edge", "", slots[0]) == ledger.StatusSucceeded && s.status("edge", "", slots[1]) == ledger.StatusSucceeded
		})
		require.Equal(t, slots, log.slots())
	})
}

func TestFrozenHolderCannotMarkSlot(t *testing.T) {
	t.Parallel()
	t.Run("Ledger", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			ctx := context.Background()
			slot := ledger.Slot{Job: "frozen", At: past(1, 0)[0]}
			a, b := ledger.Fence{Scope: "frozen", Token: 100, Owner: "A"}, ledger.Fence{Scope: "frozen", Token: 200, Owner: "B"}

			attempt, _, err := s.ledger.Begin(ctx, slot, a, 3, time.Now())
			require.NoError(t, err)
			require.Equal(t, 1, attempt)
			// A freezes past its lease; B takes the lease (larger token)
			// and takes A's running attempt over: A's is abandoned.
			attempt, _, err = s.ledger.Begin(ctx, slot, b, 3, time.Now())
			require.NoError(t, err)
			require.Equal(t, 2, attempt)

			err = s.ledger.Finish(ctx, slot, a, 1, ledger.Outcome{Status: ledger.StatusSucceeded}, time.Now())
			require.ErrorIs(t, err, fence.ErrStaleToken)
			var stale *fence.StaleTokenError
			require.ErrorAs(t, err, &stale)
			require.Equal(t, a.Token, stale.Presented)
			require.Equal(t, b.Token, stale.Current)
			rec := s.record(t, "frozen", "", slot.At)
			require.Equal(t, ledger.StatusRunning, rec.Status)
			require.Equal(t, 2, rec.Attempt)
			require.Len(t, rec.Attempts, 2)
			require.Equal(t, ledger.StatusAbandoned, rec.Attempts[0].Status)
			require.Equal(t, a.Token, rec.Attempts[0].Token)
			latest, _ := rec.Latest()
			require.Equal(t, ledger.StatusRunning, latest.Status)
			require.Equal(t, b.Token, latest.Token)
			require.Equal(t, "B", latest.Owner)

			// A cannot begin another slot either, nor heartbeat, nor can
			// another owner reuse B's token.
			other := ledger.Slot{Job: "frozen", At: slot.At.Add(time.Second)}
			_, _, err = s.ledger.Begin(ctx, other, a, 3, time.Now())
			require.ErrorIs(t, err, fence.ErrStaleToken)
			_, _, err = s.ledger.Begin(ctx, other, ledger.Fence{Scope: "frozen", Token: b.Token, Owner: "C"}, 3, time.Now())
			require.ErrorIs(t, err, fence.ErrStaleToken)
			require.ErrorIs(t, s.ledger.Heartbeat(ctx, slot, a, 1, time.Now()), fence.ErrStaleToken)
			_, found, err := s.ledger.Get(ctx, other)
			require.NoError(t, err)
			require.False(t, found, "a refused Begin writes nothing")

			require.NoError(t, s.ledger.Finish(ctx, slot, b, 2, ledger.Outcome{Status: ledger.StatusSucceeded}, time.Now()))
			rec = s.record(t, "frozen", "", slot.At)
			require.Equal(t, ledger.StatusSucceeded, rec.Status)
			require.Equal(t, 2, rec.Attempt)
			_, _, err = s.ledger.Begin(ctx, slot, ledger.Fence{Scope: "frozen", Token: b.Token + 1, Owner: "D"}, 3, time.Now())
			require.ErrorIs(t, err, ledger.ErrSlotDone)
		})
	})
	t.Run("Scheduler", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			at := past(1, 0)[0]
			var (
				log       runLog
				aStarted  = make(chan struct{})
				bRan      = make(chan struct{})
				aCanceled = make(chan error, 1)
			)
			// A TTL the loaded machine's round trips never come near: a
			// grant answered after TTL - Drift is refused as slow, and
			// claimNow, outside the dispatcher, would not retry it. The
			// loss is seen at a's next renewal, within TTL/3 (1 s).
			base := Job{Name: "frozen", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second), LeaseTTL: 3 * time.Second}
			jobA, jobB := base, base
			jobA.Run = func(ctx context.Context, run Run) error {
				log.add(run)
				close(aStarted)
				<-ctx.Done() // until the lease is lost
				aCanceled <- context.Cause(ctx)
				<-bRan // a late write attempt, after the new holder started
				return ctx.Err()
			}
			jobB.Run = func(ctx context.Context, run Run) error {
				log.add(run)
				close(bRan)
				return nil
			}
			watchA := &watchedLedger{}
			a := s.replica(t, watched(watchA))
			require.NoError(t, a.Register(jobA))
			b := s.replica(t)
			require.NoError(t, b.Register(jobB))

			aDone := make(chan struct{})
			go func() {
				defer close(aDone)
				claimNow(t, a, "frozen", "", at)
			}()
			testwait.Done(t, aStarted, 10*time.Second, "a runs the slot")
			// A's lease is force-lost (expired, evicted) while its job
			// is still running; b's timer fires and b takes over.
			s.dropLease(t, "frozen", "")
			claimNow(t, b, "frozen", "", at)
			testwait.Done(t, aDone, 10*time.Second, "a's claim ends")

			require.ErrorIs(t, <-aCanceled, lease.ErrLost, "a's job ctx ends with the lease")
			runs := log.all()
			require.Len(t, runs, 2)
			require.Equal(t, 1, runs[0].Attempt)
			require.Equal(t, 2, runs[1].Attempt)
			require.Greater(t, runs[1].Token, runs[0].Token)

			calls := watchA.calls()
			require.Len(t, calls, 1)
			require.ErrorIs(t, calls[0].err, fence.ErrStaleToken, "a's Finish is refused")
			require.Equal(t, runs[0].Token, calls[0].fence.Token)

			rec := s.record(t, "frozen", "", at)
			require.Equal(t, ledger.StatusSucceeded, rec.Status)
			require.Equal(t, 2, rec.Attempt)
			require.Len(t, rec.Attempts, 2)
			require.Equal(t, ledger.StatusAbandoned, rec.Attempts[0].Status, "b's Begin marks a's attempt abandoned")
			require.Equal(t, runs[0].Token, rec.Attempts[0].Token)
			latest, _ := rec.Latest()
			require.Equal(t, ledger.StatusSucceeded, latest.Status)
			require.Equal(t, runs[1].Token, latest.Token)
			require.Equal(t, runs[1].Owner, latest.Owner)
		})
	})
}

func TestFailedSlotIsRetried(t *testing.T) {
	t.Parallel()
	t.Run("UntilMaxAttempts", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			const maxAttempts = 3
			at := past(1, 0)[0]
			var log runLog
			job := Job{
				Name: "flaky", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second),
				MaxAttempts: maxAttempts, RetryBackoff: 50 * time.Millisecond,
				Run: func(ctx context.Context, run Run) error {
					log.add(run)
					return fmt.Errorf("bank API down (attempt %d)", run.Attempt)
				},
			}
			sched := s.replica(t)
			require.NoError(t, sched.Register(job))
			claimNow(t, sched, "flaky", "", at)
			require.Equal(t, 1, log.count("", at), "one attempt per claim")
			rec := s.record(t, "flaky", "", at)
			require.Equal(t, ledger.StatusFailed, rec.Status)
			require.Equal(t, 1, rec.Attempt)
			require.False(t, rec.RetryAt.IsZero(), "the next attempt's time is stored")

			// The retry is the dispatcher's: it wakes at RetryAt.
			require.NoError(t, sched.Start(context.Background()))
			testwait.Until(t, 10*time.Second, "every attempt made", func() bool {
				rec := s.record(t, "flaky", "", at)
				return rec.Attempt == maxAttempts && rec.Status == ledger.StatusFailed
			})
			require.NoError(t, sched.Stop(context.Background()))
			rec = s.record(t, "flaky", "", at)
			require.True(t, rec.RetryAt.IsZero(), "the last failure is final")
			require.Len(t, rec.Attempts, maxAttempts)
			for i, a := range rec.Attempts {
				require.Equal(t, i+1, a.N)
				require.Equal(t, ledger.StatusFailed, a.Status)
				require.Equal(t, ledger.ClassRetryable, a.Class)
				require.Equal(t, fmt.Sprintf("bank API down (attempt %d)", i+1), a.Error)
			}

			// The last attempt was final: later claims, on any replica,
			// leave the slot failed.
			claimNow(t, sched, "flaky", "", at)
			other := s.replica(t)
			require.NoError(t, other.Register(job))
			claimNow(t, other, "flaky", "", at)
			claimWake(t, other, "flaky", "")
			require.Equal(t, maxAttempts, log.count("", at))
			require.Equal(t, rec, s.record(t, "flaky", "", at))
			for i, r := range log.all() {
				require.Equal(t, i+1, r.Attempt)
			}
			require.Empty(t, s.open(t, "flaky", ""), "a slot out of attempts is no longer open")
		})
	})
	t.Run("PanicIsAFailedAttempt", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			at := past(1, 0)[0]
			sched := s.replica(t)
			require.NoError(t, sched.Register(Job{
				Name: "panics", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second),
				Run: func(ctx context.Context, run Run) error { panic("boom") },
			}))
			claimNow(t, sched, "panics", "", at)
			rec := s.record(t, "panics", "", at)
			require.Equal(t, ledger.StatusFailed, rec.Status)
			require.False(t, rec.RetryAt.IsZero(), "a panic is retried")
			a, _ := rec.Latest()
			require.Equal(t, ledger.ClassPanic, a.Class)
			require.Contains(t, a.Error, "boom")
		})
	})
	t.Run("SucceedsOnRetry", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			at := past(1, 0)[0]
			var log runLog
			job := Job{
				Name: "flaky", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second),
				RetryBackoff: 50 * time.Millisecond,
				Run: func(ctx context.Context, run Run) error {
					log.add(run)
					if run.Attempt == 1 {
						return errors.New("transient")
					}
					return nil
				},
			}
			sched := s.replica(t)
			require.NoError(t, sched.Register(job))
			claimNow(t, sched, "flaky", "", at)
			require.NoError(t, sched.Start(context.Background()))
			testwait.Until(t, 10*time.Second, "retry succeeded", func() bool {
				return s.status("flaky", "", at) == ledger.StatusSucceeded
			})
			require.NoError(t, sched.Stop(context.Background()))
			claimNow(t, sched, "flaky", "", at)
			require.Equal(t, 2, log.count("", at))
			rec := s.record(t, "flaky", "", at)
			require.Equal(t, 2, rec.Attempt)
			require.Equal(t, ledger.StatusFailed, rec.Attempts[0].Status)
			require.Equal(t, "transient", rec.Attempts[0].Error)
			require.Equal(t, ledger.StatusSucceeded, rec.Attempts[1].Status)
			require.Empty(t, rec.Attempts[1].Error)
		})
	})
}

func TestStopDrainsAndInterruptsAfterGrace(t *testing.T) {
	t.Parallel()
	t.Run("GenerousGraceLetsTheRunFinish", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			started, proceed := make(chan struct{}), make(chan struct{})
			runErr := make(chan error, 1)
			sched := s.started(t, Job{
				Name: "drain", Spec: yearly,
				Run: func(ctx context.Context, run Run) error {
					close(started)
					<-proceed
					runErr <- ctx.Err()
					return nil
				},
			})
			slot, err := sched.Trigger(context.Background(), "drain", "", "drain test")
			require.NoError(t, err)
			testwait.Done(t, started, 10*time.Second, "job started")

			stopped := make(chan error, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				stopped <- sched.Stop(ctx)
			}()
			select {
			case err := <-stopped:
				t.Fatalf("Stop returned %v while a run was in progress", err)
			default:
			}
			close(proceed)
			require.NoError(t, <-stopped)
			require.NoError(t, <-runErr, "the job's ctx stayed alive within the grace period")
			rec := s.record(t, "drain", "", slot.At)
			require.Equal(t, ledger.StatusSucceeded, rec.Status)
			leaseKey, _ := s.leaseKeys(t, "drain", "")
			require.ErrorIs(t, s.rdb.Get(context.Background(), leaseKey).Err(), redis.Nil, "the lease is released")
		})
	})
	t.Run("ShortGraceInterrupts", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			started := make(chan struct{})
			cause := make(chan error, 1)
			sched := s.started(t, Job{
				Name: "interrupt", Spec: yearly,
				Run: func(ctx context.Context, run Run) error {
					close(started)
					<-ctx.Done()
					cause <- context.Cause(ctx)
					return ctx.Err()
				},
			})
			slot, err := sched.Trigger(context.Background(), "interrupt", "", "interrupt test")
			require.NoError(t, err)
			testwait.Done(t, started, 10*time.Second, "job started")

			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			require.ErrorIs(t, sched.Stop(ctx), context.DeadlineExceeded)
			require.ErrorIs(t, <-cause, ErrInterrupted, "the job's ctx was canceled")
			rec := s.record(t, "interrupt", "", slot.At)
			require.Equal(t, ledger.StatusFailed, rec.Status)
			require.Equal(t, 1, rec.Attempt)
			a, _ := rec.Latest()
			require.Equal(t, ledger.ClassInterrupted, a.Class)
			require.False(t, rec.RetryAt.IsZero(), "the interrupted slot is retried")
			open := s.open(t, "interrupt", "")
			require.Len(t, open, 1)
			require.Equal(t, slot.At, open[0].At)
			require.Equal(t, rec.RetryAt, open[0].RetryAt)

			require.NoError(t, sched.Stop(context.Background()), "second Stop")
			require.ErrorIs(t, sched.Start(context.Background()), ErrStarted)
		})
	})
	t.Run("StopBeforeStart", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			sched := s.replica(t)
			require.NoError(t, sched.Stop(context.Background()))
			require.NoError(t, sched.Stop(context.Background()))
			require.ErrorIs(t, sched.Start(context.Background()), ErrStarted, "a stopped scheduler never starts")
		})
	})
}

func TestRegisterAndNewRejectBadInput(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		run := func(context.Context, Run) error { return nil }
		ok := Job{Name: "ok", Spec: yearly, Run: run}
		now := time.Now()
		for _, tc := range []struct {
			name string
			edit func(j *Job)
			want []error
		}{
			{"EmptyName", func(j *Job) { j.Name = "" }, []error{ErrInvalidJob}},
			{"NameNotUTF8", func(j *Job) { j.Name = "bad\xffname" }, []error{ErrInvalidJob}},
			{"NameWithNUL", func(j *Job) { j.Name = "bad\x00name" }, []error{ErrInvalidJob}},
			{"PartitionWithNewline", func(j *Job) { j.Partitions = []string{"eu\n"} }, []error{ErrInvalidJob}},
			{"OversizedName", func(j *Job) { j.Name = strings.Repeat("x", ledger.MaxJobNameLen+1) }, []error{ErrInvalidJob}},
			{"OpenBrace", func(j *Job) { j.Name = "a{b" }, []error{ErrInvalidJob}},
			{"CloseBrace", func(j *Job) { j.Name = "a}b" }, []error{ErrInvalidJob}},
			{"Pipe", func(j *Job) { j.Name = "a|b" }, []error{ErrInvalidJob}},
			{"NilRun", func(j *Job) { j.Run = nil }, []error{ErrInvalidJob}},
			{"InvalidSpec", func(j *Job) { j.Spec = "61 * * * * *" }, []error{ErrInvalidJob, cron.ErrInvalidSpec}},
			{"EmptySpec", func(j *Job) { j.Spec = "" }, []error{ErrInvalidJob, cron.ErrInvalidSpec}},
			// Issue 11: these registered and ran every second, or never.
			{"SubSecondEvery", func(j *Job) { j.Spec = "@every 500ms" }, []error{ErrInvalidJob, cron.ErrInvalidSpec}},
			{"FractionalEvery", func(j *Job) { j.Spec = "@every 1500ms" }, []error{ErrInvalidJob, cron.ErrInvalidSpec}},
			{"SpecThatNeverFires", func(j *Job) { j.Spec = "0 0 30 2 *" }, []error{ErrInvalidJob, cron.ErrInvalidSpec}},
			{"UnknownZone", func(j *Job) { j.Zone = "Mars/Olympus_Mons" }, []error{ErrInvalidJob, cron.ErrUnknownZone}},
			{"EndAtBeforeStartAt", func(j *Job) { j.StartAt, j.EndAt = now, now.Add(-time.Second) }, []error{ErrInvalidJob}},
			{"EndAtEqualsStartAt", func(j *Job) { j.StartAt, j.EndAt = now, now }, []error{ErrInvalidJob}},
			{"NegativeMaxAttempts", func(j *Job) { j.MaxAttempts = -1 }, []error{ErrInvalidJob}},
			{"NegativeMaxCatchUp", func(j *Job) { j.MaxCatchUp = -1 }, []error{ErrInvalidJob}},
			{"MaxDeferralsBelowMinusOne", func(j *Job) { j.MaxDeferrals = -2 }, []error{ErrInvalidJob}},
			{"NegativeTimeout", func(j *Job) { j.Timeout = -time.Second }, []error{ErrInvalidJob}},
			{"NegativeRetryBackoff", func(j *Job) { j.RetryBackoff = -time.Second }, []error{ErrInvalidJob}},
			{"NegativeRetryMaxBackoff", func(j *Job) { j.RetryMaxBackoff = -time.Second }, []error{ErrInvalidJob}},
			{"RetryBackoffAboveRetryMaxBackoff", func(j *Job) { j.RetryBackoff, j.RetryMaxBackoff = time.Hour, time.Minute }, []error{ErrInvalidJob}},
			{"NegativeCatchUpWindow", func(j *Job) { j.CatchUpWindow = -time.Second }, []error{ErrInvalidJob}},
			{"LeaseTTLBelowLeaseMinimum", func(j *Job) { j.LeaseTTL = leasedriver.MinTTL - 1 }, []error{ErrInvalidJob}},
			{"UnknownOverlapPolicy", func(j *Job) { j.Overlap = OverlapAllow + 1 }, []error{ErrInvalidJob}},
			{"NameAndPartitionTooLongForPerSlotLeases", func(j *Job) {
				j.Name, j.Partitions, j.Overlap = strings.Repeat("n", ledger.MaxJobNameLen), []string{strings.Repeat("p", ledger.MaxPartitionLen)}, OverlapAllow
			}, []error{ErrInvalidJob}},
			{"UnknownMissedPolicy", func(j *Job) { j.Missed = MissedManual + 1 }, []error{ErrInvalidJob}},
			{"EmptyPartitionAmongSeveral", func(j *Job) { j.Partitions = []string{"eu", ""} }, []error{ErrInvalidJob}},
			{"OversizedPartition", func(j *Job) { j.Partitions = []string{strings.Repeat("p", ledger.MaxPartitionLen+1)} }, []error{ErrInvalidJob}},
			{"PartitionWithBrace", func(j *Job) { j.Partitions = []string{"e{u"} }, []error{ErrInvalidJob}},
			{"PartitionWithPipe", func(j *Job) { j.Partitions = []string{"e|u"} }, []error{ErrInvalidJob}},
			// A partition "p@5" would hold the lease of partition p's slot at
			// 5 under OverlapAllow, a job "a@1780000000" that of job a's slot.
			{"PartitionWithAt", func(j *Job) { j.Partitions = []string{"p@5"} }, []error{ErrInvalidJob}},
			{"NameWithAt", func(j *Job) { j.Name = "a@1780000000" }, []error{ErrInvalidJob}},
			{"NameWithPipe", func(j *Job) { j.Name = "a|eu" }, []error{ErrInvalidJob}},
			{"DuplicatePartition", func(j *Job) { j.Partitions = []string{"eu", "us", "eu"} }, []error{ErrInvalidJob}},
			// Issue 32: names that look like other names, or like nothing,
			// in the console and the CLI.
			{"BlankName", func(j *Job) { j.Name = " " }, []error{ErrInvalidJob}},
			{"BlankNameOfWideSpaces", func(j *Job) { j.Name = "\u3000\u00a0" }, []error{ErrInvalidJob}},
			// The CLI's and a browser's request for job ".." went to
			// /admin/pause (a fresh user's trial): refused.
			{"DotName", func(j *Job) { j.Name = "." }, []error{ErrInvalidJob}},
			{"DotDotName", func(j *Job) { j.Name = ".." }, []error{ErrInvalidJob}},
			{"NameWithZeroWidthSpace", func(j *Job) { j.Name = "settle\u200b" }, []error{ErrInvalidJob}},
			{"NameWithRightToLeftOverride", func(j *Job) { j.Name = "\u202eelttes" }, []error{ErrInvalidJob}},
			{"BlankPartition", func(j *Job) { j.Partitions = []string{"eu", "  "} }, []error{ErrInvalidJob}},
			{"PartitionWithZeroWidthSpace", func(j *Job) { j.Partitions = []string{"eu", "eu\u200b"} }, []error{ErrInvalidJob}},
			{"PartitionWithRightToLeftOverride", func(j *Job) { j.Partitions = []string{"\u202eue"} }, []error{ErrInvalidJob}},
			{"PartitionWithByteOrderMark", func(j *Job) { j.Partitions = []string{"\ufeffeu"} }, []error{ErrInvalidJob}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				sched := s.replica(t)
				job := ok
				tc.edit(&job)
				err := sched.Register(job)
				for _, want := range tc.want {
					require.ErrorIs(t, err, want)
				}
				require.NoError(t, sched.Register(ok), "a rejected job leaves no trace")
			})
		}

		leases, err := lease.New(s.rdb, lease.Options{Prefix: s.leasePrefix})
		require.NoError(t, err)
		_, err = New(Options{Ledger: s.ledger})
		require.ErrorIs(t, err, ErrInvalidOptions)
		_, err = New(Options{Leases: leases})
		require.ErrorIs(t, err, ErrInvalidOptions)
		var nilLedger *redisledger.Ledger // issue 11: accepted, and panicked at Start
		_, err = New(Options{Leases: leases, Ledger: nilLedger})
		require.ErrorIs(t, err, ErrInvalidOptions, "typed-nil Ledger")
		var nilClock *clock.Fake
		_, err = New(Options{Leases: leases, Ledger: s.ledger, Clock: nilClock})
		require.ErrorIs(t, err, ErrInvalidOptions, "typed-nil Clock")
		_, err = New(Options{Leases: leases, Ledger: s.ledger, MaxConcurrentClaims: -1})
		require.ErrorIs(t, err, ErrInvalidOptions)
		_, err = redisledger.New(nil, redisledger.Options{})
		require.ErrorIs(t, err, redisledger.ErrInvalidOptions)
		_, err = redisledger.New(s.rdb, redisledger.Options{Prefix: "a{b}:"})
		require.ErrorIs(t, err, redisledger.ErrInvalidOptions)
		keys, err := s.rdb.Keys(context.Background(), s.ledgerPrefix+"*").Result()
		require.NoError(t, err)
		require.Empty(t, keys, "bad input must not touch the ledger")

		// A valid job's Start claims it once (recovery), which may write
		// to the ledger before Stop: after the check above.
		sched := s.replica(t)
		require.NoError(t, sched.Register(ok))
		require.ErrorIs(t, sched.Register(ok), ErrInvalidJob)
		require.NoError(t, sched.Start(context.Background()))
		late := ok
		late.Name = "late"
		require.ErrorIs(t, sched.Register(late), ErrStarted)
		require.ErrorIs(t, sched.Start(context.Background()), ErrStarted)
		require.NoError(t, sched.Stop(context.Background()))
	})
}

// Defaults and warnings of Register for inputs that are valid but easy to
// get wrong: a RetryBackoff above the default cap raises the cap, and a
// window that already ended registers (a configuration stays valid after
// its EndAt) with a job_window_ended warning.
func TestRegisterDefaultsAndWarnings(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		run := func(context.Context, Run) error { return nil }
		var mu sync.Mutex
		warned := map[string]map[string]string{}
		sched := s.replica(t, logTo(func(msg string, attrs map[string]string) {
			if msg == "job_window_ended" {
				mu.Lock()
				defer mu.Unlock()
				warned[attrs["job"]] = attrs
			}
		}))
		require.NoError(t, sched.Register(Job{Name: "slow-retries", Spec: yearly, Run: run, RetryBackoff: time.Hour}))
		require.Equal(t, time.Hour, sched.jobs["slow-retries"].RetryMaxBackoff, "the default cap is raised to RetryBackoff")
		require.NoError(t, sched.Register(Job{Name: "default-retries", Spec: yearly, Run: run}))
		require.Equal(t, defaultRetryMaxBackoff, sched.jobs["default-retries"].RetryMaxBackoff)

		endAt := time.Now().Add(-time.Hour).Truncate(time.Second)
		require.NoError(t, sched.Register(Job{Name: "ended", Spec: everySecond, Run: run, EndAt: endAt}))
		require.NoError(t, sched.Register(Job{Name: "open", Spec: everySecond, Run: run, EndAt: time.Now().Add(time.Hour)}))
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, map[string]map[string]string{"ended": {
			"job": "ended", "end_at": endAt.UTC().Format(time.RFC3339),
			"effect": "no slot comes due; its slots can still be listed and retried",
		}}, warned)
	})
}

// Misuse is bad input, answered with a typed error, never a panic: a nil or
// zero Scheduler, a nil context.
func TestMisuseIsAnErrorNotAPanic(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	job := Job{Name: "j", Spec: yearly, Run: func(context.Context, Run) error { return nil }}
	at := time.Now().Truncate(time.Second)
	calls := func(s *Scheduler, ctx context.Context) map[string]error {
		out := map[string]error{"Register": s.Register(job), "Start": s.Start(ctx), "Stop": s.Stop(ctx),
			"Retry": s.Retry(ctx, "j", "", at, ""), "Pause": s.Pause(ctx, "j"), "Resume": s.Resume(ctx, "j", false)}
		_, out["JobStatus"] = s.JobStatus(ctx, "j")
		_, _, out["Record"] = s.Record(ctx, "j", "", at)
		_, out["Runs"] = s.Runs(ctx, "j", "", at.Add(-time.Hour), at, 10)
		_, out["Trigger"] = s.Trigger(ctx, "j", "", "")
		_, out["Backfill"] = s.Backfill(ctx, "j", "", at.Add(-time.Hour), at, "")
		return out
	}
	for name, s := range map[string]*Scheduler{"nil": nil, "zero": {}} {
		for call, err := range calls(s, ctx) {
			require.ErrorIs(t, err, ErrNotCreated, "%s scheduler: %s", name, call)
		}
		require.Nil(t, s.Jobs(), name)
	}
	eachBackend(t, func(t *testing.T, s *setup) {
		sched := s.replica(t)
		require.NoError(t, sched.Register(job))
		var nilCtx context.Context
		errs := calls(sched, nilCtx)
		require.ErrorIs(t, errs["Register"], ErrInvalidJob, "Register takes no context")
		delete(errs, "Register")
		for call, err := range errs {
			require.ErrorIs(t, err, ErrInvalidArgument, call)
			require.ErrorContains(t, err, "nil context", call)
		}
		require.NoError(t, sched.Start(ctx), "a refused Start did not start it")
		require.NoError(t, sched.Stop(ctx))
	})
}

func TestRunCarriesSlotTokenAndIdempotencyKey(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		const zone = "America/New_York"
		at := past(1, 0)[0]
		type seen struct {
			run       Run
			ctxHolder fence.Holder
			ctxHasTok bool
		}
		got := make(chan seen, 1)
		sched := s.replica(t)
		require.NoError(t, sched.Register(Job{
			Name: "fields", Spec: everySecond, Zone: zone, StartAt: at, EndAt: at.Add(time.Second),
			Run: func(ctx context.Context, run Run) error {
				h, ok := fence.HolderFromContext(ctx)
				got <- seen{run: run, ctxHolder: h, ctxHasTok: ok}
				return nil
			},
		}))
		claimNow(t, sched, "fields", "", at)
		var g seen
		select {
		case g = <-got:
		default:
			t.Fatal("job did not run")
		}

		loc, err := time.LoadLocation(zone)
		require.NoError(t, err)
		r := g.run
		require.Equal(t, "fields", r.Job)
		require.Equal(t, at, r.At)
		require.Equal(t, time.UTC, r.At.Location())
		require.Zero(t, r.At.Nanosecond(), "second precision")
		require.Empty(t, r.Partition)
		require.Equal(t, zone, r.Zone)
		require.True(t, r.Local.Equal(r.At))
		require.Equal(t, zone, r.Local.Location().String())
		require.Equal(t, r.At.In(loc).Format(time.DateOnly), r.BusinessDate)
		require.Equal(t, cron.RuleNormal, r.Rule)
		require.Equal(t, 1, r.Attempt)
		require.Equal(t, "fields:"+r.At.Format("2006-01-02T15:04:05Z")+":", r.IdempotencyKey)
		require.Equal(t, r.Slot.Key(), r.IdempotencyKey)

		_, fenceKey := s.leaseKeys(t, "fields", "")
		issued, err := s.rdb.Get(context.Background(), fenceKey).Uint64()
		require.NoError(t, err)
		require.Equal(t, fence.Token(issued), r.Token, "the lease's token")
		require.Len(t, r.Owner, 32)
		require.Equal(t, "fields", r.Scope, "the (job, partition) lease name")
		require.True(t, g.ctxHasTok)
		require.Equal(t, fence.Holder{Scope: "fields", Token: r.Token, Owner: r.Owner}, r.Holder())
		require.Equal(t, r.Holder(), g.ctxHolder, "the job's ctx carries the run's holder")
		a, ok := s.record(t, "fields", "", r.At).Latest()
		require.True(t, ok)
		require.Equal(t, r.Token, a.Token)
		require.Equal(t, r.Owner, a.Owner)
	})
}

// A run of a partition whose key is not ASCII gets an IdempotencyKey that
// an HTTP Idempotency-Key (an sf-string of printable ASCII) carries as it
// is: the key percent-encodes the partition's UTF-8 bytes.
func TestIdempotencyKeyIsAnHTTPIdempotencyKey(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		at := past(1, 0)[0]
		var log runLog
		a := s.replica(t)
		require.NoError(t, a.Register(Job{
			Name: "regional", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second), Partitions: []string{"zürich"},
			Run: func(ctx context.Context, run Run) error { log.add(run); return nil },
		}))
		claimNow(t, a, "regional", "zürich", at)
		runs := log.all()
		require.Len(t, runs, 1)
		require.Equal(t, "regional:"+at.Format(time.RFC3339)+":z%C3%BCrich", runs[0].IdempotencyKey)
		require.Equal(t, "zürich", runs[0].Partition, "the run's partition is the key itself")
		header, err := httpfence.FormatKey(runs[0].IdempotencyKey)
		require.NoError(t, err)
		require.Equal(t, `"`+runs[0].IdempotencyKey+`"`, header)
	})
}
