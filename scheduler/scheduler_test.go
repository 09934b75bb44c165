package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler/cron"
)

func TestMultipleReplicasRunEachSlotExactlyOnce(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		const replicas = 3
		startAt, endAt, slots := window(5)
		var (
			mu   sync.Mutex
			runs = map[time.Time]int{}
		)
		job := Job{
			Name: "settle", Spec: everySecond, StartAt: startAt, EndAt: endAt,
			Run: func(ctx context.Context, run Run) error {
				mu.Lock()
				defer mu.Unlock()
				runs[run.At]++
				return nil
			},
		}
		var scheds []*Scheduler
		for range replicas {
			sched := s.replica(t)
			require.NoError(t, sched.Register(job))
			scheds = append(scheds, sched)
		}
		for _, sched := range scheds {
			require.NoError(t, sched.Start(context.Background()))
		}
		eventually(t, 20*time.Second, "every slot succeeded", func() bool {
			for _, at := range slots {
				if s.status("settle", at) != StatusSucceeded {
					return false
				}
			}
			return true
		})
		for _, sched := range scheds {
			require.NoError(t, sched.Stop(context.Background()))
		}

		mu.Lock()
		defer mu.Unlock()
		require.Len(t, runs, len(slots), "runs: %v", runs)
		for _, at := range slots {
			require.Equal(t, 1, runs[at], "slot %v", at)
			rec := s.record(t, "settle", at)
			require.Equal(t, StatusSucceeded, rec.Status)
			require.Equal(t, 1, rec.Attempt)
			require.NotZero(t, rec.Token)
		}
	})
}

func TestLateTimerDoesNotRerunFinishedSlot(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		startAt, endAt, slots := window(1)
		var log runLog
		job := Job{
			Name: "late", Spec: everySecond, StartAt: startAt, EndAt: endAt,
			Run: func(ctx context.Context, run Run) error { log.add(run); return nil },
		}
		a := s.replica(t)
		require.NoError(t, a.Register(job))
		require.NoError(t, a.Start(context.Background()))
		eventually(t, 10*time.Second, "slot succeeded", func() bool { return s.status("late", slots[0]) == StatusSucceeded })
		require.NoError(t, a.Stop(context.Background()))
		before := s.record(t, "late", slots[0])

		// Replica b's timer for the same slot fires late: b computes the
		// same Fire from the schedule and claims it. So does a restarted a.
		b := s.replica(t)
		require.NoError(t, b.Register(job))
		claimNow(t, b, "late", slots[0])
		restarted := s.replica(t)
		require.NoError(t, restarted.Register(job))
		claimNow(t, restarted, "late", slots[0])

		require.Equal(t, slots, log.slots(), "the slot ran once")
		require.Equal(t, before, s.record(t, "late", slots[0]), "the record is untouched")
	})
}

func TestSlotDueWhileTheHolderReleasesIsNotLost(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		startAt, endAt, slots := window(2)
		var log runLog
		run := func(ctx context.Context, run Run) error { log.add(run); return nil }
		// b's timer fires for slots[1] only, while a still holds the lease
		// from its claim of slots[0]: b skips, leaving the slot to a.
		bSkipped := make(chan struct{})
		b := s.replica(t, logTo(func(msg string, attrs map[string]string) {
			if msg == "job_claim_skipped" && attrs["reason"] == "lease_held" {
				close(bSkipped)
			}
		}))
		require.NoError(t, b.Register(Job{Name: "edge", Spec: everySecond, StartAt: slots[1], EndAt: endAt, Run: run}))
		// a's last look at the ledger in its claim of slots[0] happens
		// before slots[1] is due, and its lease is released only after b
		// skipped.
		watch := &watchedLedger{onOutstanding: func(call int) {
			if call == 2 {
				<-bSkipped
			}
		}}
		a := s.replica(t, watched(watch))
		require.NoError(t, a.Register(Job{Name: "edge", Spec: everySecond, StartAt: startAt, EndAt: endAt, Run: run}))
		require.NoError(t, a.Start(context.Background()))
		require.NoError(t, b.Start(context.Background()))
		eventually(t, 10*time.Second, "both slots succeeded", func() bool {
			return s.status("edge", slots[0]) == StatusSucceeded && s.status("edge", slots[1]) == StatusSucceeded
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
			slot := Slot{Job: "frozen", At: past(1, 0)[0]}
			const tA, tB = fence.Token(100), fence.Token(200)

			attempt, err := s.ledger.Begin(ctx, slot, tA, "A", 3)
			require.NoError(t, err)
			require.Equal(t, 1, attempt)
			// A freezes past its lease; B takes the lease (larger token)
			// and takes A's running attempt over.
			attempt, err = s.ledger.Begin(ctx, slot, tB, "B", 3)
			require.NoError(t, err)
			require.Equal(t, 2, attempt)

			err = s.ledger.Finish(ctx, slot, tA, "A", 1, StatusSucceeded, "", false)
			require.ErrorIs(t, err, fence.ErrStaleToken)
			var stale *fence.StaleTokenError
			require.ErrorAs(t, err, &stale)
			require.Equal(t, tA, stale.Presented)
			require.Equal(t, tB, stale.Current)
			rec := s.record(t, "frozen", slot.At)
			require.Equal(t, StatusRunning, rec.Status)
			require.Equal(t, 2, rec.Attempt)
			require.Equal(t, tB, rec.Token)
			require.Equal(t, "B", rec.Owner)

			// A cannot begin another slot either, nor can another owner
			// reuse B's token.
			other := Slot{Job: "frozen", At: slot.At.Add(time.Second)}
			_, err = s.ledger.Begin(ctx, other, tA, "A", 3)
			require.ErrorIs(t, err, fence.ErrStaleToken)
			_, err = s.ledger.Begin(ctx, other, tB, "C", 3)
			require.ErrorIs(t, err, fence.ErrStaleToken)
			_, found, err := s.ledger.Get(ctx, other)
			require.NoError(t, err)
			require.False(t, found, "a refused Begin writes nothing")

			require.NoError(t, s.ledger.Finish(ctx, slot, tB, "B", 2, StatusSucceeded, "", false))
			rec = s.record(t, "frozen", slot.At)
			require.Equal(t, StatusSucceeded, rec.Status)
			require.Equal(t, 2, rec.Attempt)
			_, err = s.ledger.Begin(ctx, slot, tB+1, "D", 3)
			require.ErrorIs(t, err, ErrSlotDone)
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
			base := Job{Name: "frozen", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second), LeaseTTL: 300 * time.Millisecond}
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
				claimNow(t, a, "frozen", at)
			}()
			waitDone(t, aStarted, 10*time.Second, "a runs the slot")
			// A's lease is force-lost (expired, evicted) while its job
			// is still running; b's timer fires and b takes over.
			require.NoError(t, s.rdb.Del(context.Background(), s.leaseKeyOf(t, "frozen")).Err())
			claimNow(t, b, "frozen", at)
			waitDone(t, aDone, 10*time.Second, "a's claim ends")

			require.ErrorIs(t, <-aCanceled, lease.ErrLost, "a's job ctx ends with the lease")
			runs := log.runs
			require.Len(t, runs, 2)
			require.Equal(t, 1, runs[0].Attempt)
			require.Equal(t, 2, runs[1].Attempt)
			require.Greater(t, runs[1].Token, runs[0].Token)

			calls := watchA.calls()
			require.Len(t, calls, 1)
			require.ErrorIs(t, calls[0].err, fence.ErrStaleToken, "a's Finish is refused")
			require.Equal(t, runs[0].Token, calls[0].token)

			rec := s.record(t, "frozen", at)
			require.Equal(t, StatusSucceeded, rec.Status)
			require.Equal(t, 2, rec.Attempt)
			require.Equal(t, runs[1].Token, rec.Token)
			require.Equal(t, runs[1].Owner, rec.Owner)
		})
	})
}

func TestFailedSlotIsRetriedAtALaterClaim(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		const maxAttempts = 3
		at := past(1, 0)[0]
		var log runLog
		job := Job{
			Name: "flaky", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second), MaxAttempts: maxAttempts,
			Run: func(ctx context.Context, run Run) error {
				log.add(run)
				return fmt.Errorf("bank API down (attempt %d)", run.Attempt)
			},
		}
		sched := s.replica(t)
		require.NoError(t, sched.Register(job))
		for claim := 1; claim <= maxAttempts; claim++ {
			claimNow(t, sched, "flaky", at)
			require.Equal(t, claim, log.count(at), "one attempt per claim")
			rec := s.record(t, "flaky", at)
			require.Equal(t, StatusFailed, rec.Status)
			require.Equal(t, claim, rec.Attempt)
			require.Equal(t, fmt.Sprintf("bank API down (attempt %d)", claim), rec.LastError)
		}
		// The last attempt was final: later claims, on any replica, leave
		// the slot failed.
		claimNow(t, sched, "flaky", at)
		other := s.replica(t)
		require.NoError(t, other.Register(job))
		claimNow(t, other, "flaky", at)
		require.Equal(t, maxAttempts, log.count(at))
		rec := s.record(t, "flaky", at)
		require.Equal(t, StatusFailed, rec.Status)
		require.Equal(t, maxAttempts, rec.Attempt)
		for i, r := range log.runs {
			require.Equal(t, i+1, r.Attempt)
		}
		open, _, err := s.ledger.Outstanding(context.Background(), "flaky", "", at.Add(-time.Hour))
		require.NoError(t, err)
		require.Empty(t, open, "a slot out of attempts is no longer outstanding")
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
			claimNow(t, sched, "panics", at)
			rec := s.record(t, "panics", at)
			require.Equal(t, StatusFailed, rec.Status)
			require.Contains(t, rec.LastError, "boom")
		})
	})
	t.Run("SucceedsOnRetry", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			at := past(1, 0)[0]
			var log runLog
			job := Job{
				Name: "flaky", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second),
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
			for range 3 {
				claimNow(t, sched, "flaky", at)
			}
			require.Equal(t, 2, log.count(at))
			rec := s.record(t, "flaky", at)
			require.Equal(t, StatusSucceeded, rec.Status)
			require.Equal(t, 2, rec.Attempt)
		})
	})
}

func TestCatchUpRunsMissedSlotsAfterDowntime(t *testing.T) {
	t.Parallel()
	// seed makes the ledger show slot at begun and succeeded, as a run
	// before the downtime left it.
	seed := func(t *testing.T, s *setup, job string, at time.Time) {
		t.Helper()
		ctx := context.Background()
		slot := Slot{Job: job, At: at}
		attempt, err := s.ledger.Begin(ctx, slot, 1, "before-downtime", 3)
		require.NoError(t, err)
		require.NoError(t, s.ledger.Finish(ctx, slot, 1, "before-downtime", attempt, StatusSucceeded, "", false))
	}
	t.Run("MissedThenCurrentInOrder", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			slots := past(5, time.Second) // S, 3 missed, the current one
			var log runLog
			job := Job{
				Name: "catchup", Spec: everySecond, StartAt: slots[0], EndAt: slots[4].Add(time.Second),
				Run: func(ctx context.Context, run Run) error { log.add(run); return nil },
			}
			seed(t, s, "catchup", slots[0])
			sched := s.replica(t)
			require.NoError(t, sched.Register(job))
			claimNow(t, sched, "catchup", slots[4])
			require.Equal(t, slots[1:], log.slots(), "missed slots, oldest first, then the current one")
			for _, at := range slots[1:] {
				rec := s.record(t, "catchup", at)
				require.Equal(t, StatusSucceeded, rec.Status)
				require.Equal(t, 1, rec.Attempt)
			}
			// A second claim finds nothing due.
			claimNow(t, sched, "catchup", slots[4])
			require.Len(t, log.slots(), 4)
		})
	})
	t.Run("FreshJobDoesNotBackfill", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			slots := past(5, time.Second)
			var log runLog
			job := Job{
				Name: "fresh", Spec: everySecond, StartAt: slots[0], EndAt: slots[4].Add(time.Second),
				Run: func(ctx context.Context, run Run) error { log.add(run); return nil },
			}
			sched := s.replica(t)
			require.NoError(t, sched.Register(job))
			claimNow(t, sched, "fresh", slots[4])
			require.Equal(t, slots[4:], log.slots(), "nothing before the first claim")
			for _, at := range slots[:4] {
				require.Empty(t, s.status("fresh", at), "slot %v", at)
			}
		})
	})
	t.Run("MaxCatchUpKeepsTheMostRecent", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			slots := past(7, time.Second) // S, 5 missed, the current one
			var log runLog
			job := Job{
				Name: "bounded", Spec: everySecond, StartAt: slots[0], EndAt: slots[6].Add(time.Second), MaxCatchUp: 2,
				Run: func(ctx context.Context, run Run) error { log.add(run); return nil },
			}
			seed(t, s, "bounded", slots[0])
			sched := s.replica(t)
			require.NoError(t, sched.Register(job))
			claimNow(t, sched, "bounded", slots[6])
			require.Equal(t, slots[4:], log.slots(), "the 2 most recent missed slots, then the current one")
			for _, at := range slots[1:4] {
				require.Empty(t, s.status("bounded", at), "slot %v is skipped, not run", at)
			}
		})
	})
	t.Run("CatchUpWindowBoundsHowFarBack", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			slots := past(20, time.Second)
			const win = 4 * time.Second
			var log runLog
			job := Job{
				Name: "windowed", Spec: everySecond, StartAt: slots[0], EndAt: slots[19].Add(time.Second), CatchUpWindow: win,
				Run: func(ctx context.Context, run Run) error { log.add(run); return nil },
			}
			seed(t, s, "windowed", slots[0])
			sched := s.replica(t)
			require.NoError(t, sched.Register(job))
			before := time.Now()
			claimNow(t, sched, "windowed", slots[19])
			ran := log.slots()
			require.NotEmpty(t, ran)
			require.Equal(t, slots[19], ran[len(ran)-1], "the current slot runs")
			for i, at := range ran {
				require.False(t, at.Before(before.Add(-win-time.Second)), "slot %v is older than the window", at)
				if i > 0 {
					require.True(t, at.After(ran[i-1]), "in order")
				}
			}
			require.LessOrEqual(t, len(ran), 6)
		})
	})
}

func TestStopDrainsAndInterruptsAfterGrace(t *testing.T) {
	t.Parallel()
	t.Run("GenerousGraceLetsTheRunFinish", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			startAt, endAt, slots := window(1)
			started, proceed := make(chan struct{}), make(chan struct{})
			runErr := make(chan error, 1)
			sched := s.replica(t)
			require.NoError(t, sched.Register(Job{
				Name: "drain", Spec: everySecond, StartAt: startAt, EndAt: endAt,
				Run: func(ctx context.Context, run Run) error {
					close(started)
					<-proceed
					runErr <- ctx.Err()
					return nil
				},
			}))
			require.NoError(t, sched.Start(context.Background()))
			waitDone(t, started, 10*time.Second, "job started")

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
			rec := s.record(t, "drain", slots[0])
			require.Equal(t, StatusSucceeded, rec.Status)
			_, err := s.rdb.Get(context.Background(), s.leaseKeyOf(t, "drain")).Result()
			require.Error(t, err, "the lease is released")
		})
	})
	t.Run("ShortGraceInterrupts", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			startAt, endAt, slots := window(1)
			started := make(chan struct{})
			cause := make(chan error, 1)
			sched := s.replica(t)
			require.NoError(t, sched.Register(Job{
				Name: "interrupt", Spec: everySecond, StartAt: startAt, EndAt: endAt,
				Run: func(ctx context.Context, run Run) error {
					close(started)
					<-ctx.Done()
					cause <- context.Cause(ctx)
					return ctx.Err()
				},
			}))
			require.NoError(t, sched.Start(context.Background()))
			waitDone(t, started, 10*time.Second, "job started")

			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			require.ErrorIs(t, sched.Stop(ctx), context.DeadlineExceeded)
			require.ErrorIs(t, <-cause, lease.ErrParentDone, "the job's ctx was canceled")
			rec := s.record(t, "interrupt", slots[0])
			require.Equal(t, StatusFailed, rec.Status)
			require.Equal(t, 1, rec.Attempt)
			require.True(t, strings.HasPrefix(rec.LastError, "interrupted: "), "error %q", rec.LastError)
			open, _, err := s.ledger.Outstanding(context.Background(), "interrupt", "", slots[0])
			require.NoError(t, err)
			require.Equal(t, slots, open, "the interrupted slot is retried at a later claim")

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
		})
	})
}

func TestRegisterAndNewRejectBadInput(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		run := func(context.Context, Run) error { return nil }
		ok := Job{Name: "ok", Spec: everySecond, Run: run}
		now := time.Now()
		for _, tc := range []struct {
			name string
			edit func(j *Job)
			want []error
		}{
			{"EmptyName", func(j *Job) { j.Name = "" }, []error{ErrInvalidJob}},
			{"OversizedName", func(j *Job) { j.Name = strings.Repeat("x", MaxJobNameLen+1) }, []error{ErrInvalidJob}},
			{"OpenBrace", func(j *Job) { j.Name = "a{b" }, []error{ErrInvalidJob}},
			{"CloseBrace", func(j *Job) { j.Name = "a}b" }, []error{ErrInvalidJob}},
			{"Pipe", func(j *Job) { j.Name = "a|b" }, []error{ErrInvalidJob}},
			{"NilRun", func(j *Job) { j.Run = nil }, []error{ErrInvalidJob}},
			{"InvalidSpec", func(j *Job) { j.Spec = "61 * * * * *" }, []error{ErrInvalidJob, cron.ErrInvalidSpec}},
			{"EmptySpec", func(j *Job) { j.Spec = "" }, []error{ErrInvalidJob, cron.ErrInvalidSpec}},
			{"UnknownZone", func(j *Job) { j.Zone = "Mars/Olympus_Mons" }, []error{ErrInvalidJob, cron.ErrUnknownZone}},
			{"EndAtBeforeStartAt", func(j *Job) { j.StartAt, j.EndAt = now, now.Add(-time.Second) }, []error{ErrInvalidJob}},
			{"EndAtEqualsStartAt", func(j *Job) { j.StartAt, j.EndAt = now, now }, []error{ErrInvalidJob}},
			{"NegativeMaxAttempts", func(j *Job) { j.MaxAttempts = -1 }, []error{ErrInvalidJob}},
			{"LeaseTTLBelowLeaseMinimum", func(j *Job) { j.LeaseTTL = lease.MinTTL - 1 }, []error{ErrInvalidJob}},
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

		sched := s.replica(t)
		require.NoError(t, sched.Register(ok))
		require.ErrorIs(t, sched.Register(ok), ErrDuplicateJob)
		require.NoError(t, sched.Start(context.Background()))
		late := ok
		late.Name = "late"
		require.ErrorIs(t, sched.Register(late), ErrStarted)
		require.ErrorIs(t, sched.Start(context.Background()), ErrStarted)
		require.NoError(t, sched.Stop(context.Background()))

		leases, err := lease.New(s.rdb, lease.Options{Prefix: s.leasePrefix})
		require.NoError(t, err)
		_, err = New(Config{Ledger: s.ledger})
		require.ErrorIs(t, err, ErrInvalidConfig)
		_, err = New(Config{Leases: leases})
		require.ErrorIs(t, err, ErrInvalidConfig)
		_, err = NewRedisLedger(nil, "")
		require.ErrorIs(t, err, ErrInvalidConfig)
		_, err = NewRedisLedger(s.rdb, "a{b}:")
		require.ErrorIs(t, err, ErrInvalidConfig)
		keys, err := s.rdb.Keys(context.Background(), s.ledgerPrefix+"*").Result()
		require.NoError(t, err)
		require.Empty(t, keys, "bad input must not touch the ledger")
	})
}

func TestRunCarriesSlotTokenAndIdempotencyKey(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		const zone = "America/New_York"
		startAt, endAt, slots := window(1)
		type seen struct {
			run       Run
			ctxToken  fence.Token
			ctxOwner  string
			ctxHasTok bool
		}
		got := make(chan seen, 1)
		sched := s.replica(t)
		require.NoError(t, sched.Register(Job{
			Name: "fields", Spec: everySecond, Zone: zone, StartAt: startAt, EndAt: endAt,
			Run: func(ctx context.Context, run Run) error {
				tok, owner, ok := fence.FromContext(ctx)
				got <- seen{run: run, ctxToken: tok, ctxOwner: owner, ctxHasTok: ok}
				return nil
			},
		}))
		require.NoError(t, sched.Start(context.Background()))
		var g seen
		select {
		case g = <-got:
		case <-time.After(10 * time.Second):
			t.Fatal("job did not run")
		}
		require.NoError(t, sched.Stop(context.Background()))

		loc, err := time.LoadLocation(zone)
		require.NoError(t, err)
		r := g.run
		require.Equal(t, "fields", r.Job)
		require.Equal(t, slots[0], r.At)
		require.Equal(t, time.UTC, r.At.Location())
		require.Zero(t, r.At.Nanosecond(), "second precision")
		require.Empty(t, r.Partition)
		require.Equal(t, zone, r.Zone)
		require.True(t, r.Local.Equal(r.At))
		require.Equal(t, loc, r.Local.Location())
		require.Equal(t, r.At.In(loc).Format(time.DateOnly), r.BusinessDate)
		require.Equal(t, 1, r.Attempt)
		require.Equal(t, "fields:"+r.At.Format("2006-01-02T15:04:05Z")+":", r.IdempotencyKey)
		require.Equal(t, r.Slot.Key(), r.IdempotencyKey)

		_, fenceKey := s.leaseKeys(t, "fields")
		issued, err := s.rdb.Get(context.Background(), fenceKey).Uint64()
		require.NoError(t, err)
		require.Equal(t, fence.Token(issued), r.Token, "the lease's token")
		require.Len(t, r.Owner, 32)
		require.True(t, g.ctxHasTok)
		require.Equal(t, r.Token, g.ctxToken)
		require.Equal(t, r.Owner, g.ctxOwner)
		rec := s.record(t, "fields", r.At)
		require.Equal(t, r.Token, rec.Token)
		require.Equal(t, r.Owner, rec.Owner)
	})
}
