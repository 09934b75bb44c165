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
)

func TestPartitionsRunEachSlotOnceUnderLeasesOfTheirOwn(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		parts := []string{"eu", "us", "apac", "latam"}
		startAt, endAt, slots := slotWindow(3)
		var (
			log      runLog
			mu       sync.Mutex
			inFlight int
			together = make(chan struct{})
		)
		job := Job{
			Name: "tenants", Spec: everySecond, StartAt: startAt, EndAt: endAt, Partitions: parts,
			Run: func(ctx context.Context, run Run) error {
				log.add(run)
				if !run.At.Equal(slots[0]) {
					return nil
				}
				// Every partition's run of the first slot waits until all
				// of them are in flight at once: with one lease per job
				// they could not be.
				mu.Lock()
				if inFlight++; inFlight == len(parts) {
					close(together)
				}
				mu.Unlock()
				timer := time.NewTimer(5 * time.Second)
				defer timer.Stop()
				select {
				case <-together:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				case <-timer.C:
					return errors.New("the partitions did not run concurrently")
				}
			},
		}
		a := s.started(t, job)
		b := s.started(t, job)
		eventually(t, 20*time.Second, "every (slot, partition) succeeded", func() bool {
			for _, p := range parts {
				for _, at := range slots {
					if s.status("tenants", p, at) != StatusSucceeded {
						return false
					}
				}
			}
			return true
		})
		require.NoError(t, a.Stop(context.Background()))
		require.NoError(t, b.Stop(context.Background()))

		select {
		case <-together:
		default:
			t.Fatal("the partitions of the first slot were never all in flight at once")
		}
		require.Len(t, log.all(), len(parts)*len(slots))
		for _, p := range parts {
			for _, at := range slots {
				require.Equal(t, 1, log.count(p, at), "slot %v partition %q", at, p)
				rec := s.record(t, "tenants", p, at)
				require.Equal(t, 1, rec.Attempt, "slot %v partition %q", at, p)
				require.Equal(t, Slot{Job: "tenants", At: at, Partition: p}, rec.Slot)
			}
			recs, err := a.Runs(context.Background(), "tenants", p, startAt, endAt, 10)
			require.NoError(t, err)
			require.Len(t, recs, len(slots), "a partition's records are its own")
		}
		leaseKeys := map[string]bool{}
		for _, p := range parts {
			k, _ := s.leaseKeys(t, "tenants", p)
			leaseKeys[k] = true
		}
		require.Len(t, leaseKeys, len(parts), "one lease per partition")
		for _, r := range log.all() {
			require.Contains(t, parts, r.Partition)
			require.Equal(t, r.Slot.Key(), r.IdempotencyKey)
			require.True(t, strings.HasSuffix(r.IdempotencyKey, ":"+r.Partition), "key %q", r.IdempotencyKey)
			require.Equal(t, "tenants:"+r.At.Format(time.RFC3339)+":"+r.Partition, r.IdempotencyKey)
		}
		_, err := a.Runs(context.Background(), "tenants", "", startAt, endAt, 10)
		require.ErrorIs(t, err, ErrUnknownJob, "a partitioned job has no \"\" partition")
	})
}

// Under OverlapAllow the run of slots[0] lasts until the run of slots[2]
// has started, on either replica: the three runs overlap, and each slot
// still runs once, under a lease and a fence of its own.
func TestOverlapAllowRunsOverlappingSlotsOnceEach(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		startAt, endAt, slots := slotWindow(3)
		lastStarted := make(chan struct{})
		var once sync.Once
		var log runLog
		job := Job{
			Name: "fanout", Spec: everySecond, StartAt: startAt, EndAt: endAt, Overlap: OverlapAllow,
			Run: func(ctx context.Context, run Run) error {
				defer log.begin(run)()
				if run.At.Equal(slots[2]) {
					once.Do(func() { close(lastStarted) })
				}
				if !run.At.Equal(slots[0]) {
					return nil
				}
				timer := time.NewTimer(10 * time.Second)
				defer timer.Stop()
				select {
				case <-lastStarted:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				case <-timer.C:
					return errors.New("slots[2] never started while slots[0] ran")
				}
			},
		}
		a := s.started(t, job)
		b := s.started(t, job)
		eventually(t, 15*time.Second, "the three slots succeeded", func() bool {
			for _, at := range slots {
				if s.status("fanout", "", at) != StatusSucceeded {
					return false
				}
			}
			return true
		})
		require.NoError(t, a.Stop(context.Background()))
		require.NoError(t, b.Stop(context.Background()))

		runs := log.all()
		require.ElementsMatch(t, slots, log.slots(), "each slot ran once")
		tokens := map[fence.Token]bool{}
		for _, r := range runs {
			require.Equal(t, 1, r.Attempt)
			tokens[r.Token] = true
		}
		require.Len(t, tokens, 3, "a lease, and so a token, per slot")
		var first span
		for _, sp := range log.allSpans() {
			if sp.run.At.Equal(slots[0]) {
				first = sp
			}
		}
		for _, sp := range log.allSpans() {
			if sp.run.At.After(slots[0]) {
				require.True(t, sp.start.Before(first.end), "slot %v started while slots[0] ran", sp.run.At)
			}
		}
		for _, at := range slots {
			rec := s.record(t, "fanout", "", at)
			require.Equal(t, 1, rec.Attempt)
			require.Equal(t, StatusSucceeded, rec.Attempts[0].Status)
		}
	})
}

// Runs of OverlapAllow are not bounded by the claim pool: with one place,
// the recovery claim at Start begins two missed slots and both run at
// once; none is begun and left waiting, and Stop drains both.
func TestOverlapAllowRunsAreNotBoundedByThePool(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		S := time.Now().Truncate(time.Second).Add(time.Second).UTC()
		slots := []time.Time{S, S.Add(time.Second), S.Add(2 * time.Second)}
		started, release := make(chan Run, 3), make(chan struct{})
		job := Job{
			Name: "wide", Spec: everySecond, StartAt: slots[0], EndAt: slots[2].Add(time.Second), Overlap: OverlapAllow,
			Run: func(ctx context.Context, run Run) error {
				started <- run
				<-release
				return nil
			},
		}
		// The ledger's horizon starts before slots[0] (seeded now); the
		// replica starts once slots[2] is due: slots[1] and slots[2] were
		// missed.
		s.seed(t, Slot{Job: "wide", At: slots[0]}, StatusSucceeded)
		waitUntil(t, slots[2])
		a := s.replica(t, func(c *Config) { c.MaxConcurrentClaims = 1 })
		require.NoError(t, a.Register(job))
		require.NoError(t, a.Start(context.Background()))
		var ran []time.Time
		for range 2 {
			select {
			case r := <-started:
				ran = append(ran, r.At)
			case <-time.After(10 * time.Second):
				t.Fatalf("only %v started: the runs wait for each other", ran)
			}
		}
		require.ElementsMatch(t, slots[1:], ran, "both missed slots run at once")
		stopped := make(chan error, 1)
		go func() { stopped <- a.Stop(context.Background()) }()
		close(release)
		require.NoError(t, <-stopped)
		for _, at := range slots[1:] {
			rec := s.record(t, "wide", "", at)
			require.Equal(t, StatusSucceeded, rec.Status, "slot %v", at)
			require.Equal(t, 1, rec.Attempt)
		}
	})
}

func TestMissedSlotsAfterDowntime(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		// S was begun and succeeded before a downtime; S+1..S+3 came due
		// while no replica ran; a replica back at S+4 claims S+4. Every
		// job shares the one wait.
		S := time.Now().Truncate(time.Second).UTC()
		slots := make([]time.Time, 5)
		for i := range slots {
			slots[i] = S.Add(time.Duration(i) * time.Second)
		}
		logs := map[string]*runLog{}
		sched := s.replica(t)
		register := func(name string, edit func(*Job)) {
			l := &runLog{}
			logs[name] = l
			job := Job{
				Name: name, Spec: everySecond, StartAt: S, EndAt: S.Add(5 * time.Second),
				Run: func(ctx context.Context, run Run) error { l.add(run); return nil },
			}
			edit(&job)
			require.NoError(t, sched.Register(job))
		}
		register("catchup", func(*Job) {})
		register("bounded", func(j *Job) { j.MaxCatchUp = 2 })
		register("windowed", func(j *Job) { j.CatchUpWindow = 2 * time.Second })
		register("latest", func(j *Job) { j.Missed = MissedLatestOnly })
		register("skip", func(j *Job) { j.Missed = MissedSkip })
		register("manual", func(j *Job) { j.Missed = MissedManual })
		register("fresh", func(*Job) {})
		for name := range logs {
			if name != "fresh" {
				s.seed(t, Slot{Job: name, At: S}, StatusSucceeded)
			}
		}
		waitUntil(t, slots[4])
		for name := range logs {
			claimNow(t, sched, name, "", slots[4])
		}

		requireSkipped := func(t *testing.T, job string, status Status, reason string, ats ...time.Time) {
			t.Helper()
			for _, at := range ats {
				rec := s.record(t, job, "", at)
				require.Equal(t, status, rec.Status, "slot %v", at)
				require.True(t, strings.HasPrefix(rec.Reason, reason), "slot %v reason %q", at, rec.Reason)
				require.Empty(t, rec.Attempts, "slot %v never ran", at)
			}
		}
		requireSucceeded := func(t *testing.T, job string, ats ...time.Time) {
			t.Helper()
			for _, at := range ats {
				rec := s.record(t, job, "", at)
				require.Equal(t, StatusSucceeded, rec.Status, "slot %v", at)
				require.Equal(t, 1, rec.Attempt)
			}
		}
		t.Run("CatchUpRunsMissedSlotsThenTheCurrentInOrder", func(t *testing.T) {
			require.Equal(t, slots[1:], logs["catchup"].slots())
			requireSucceeded(t, "catchup", slots[1:]...)
			claimNow(t, sched, "catchup", "", slots[4])
			require.Len(t, logs["catchup"].slots(), 4, "a second claim finds nothing due")
		})
		t.Run("CatchUpKeepsTheMaxCatchUpLatest", func(t *testing.T) {
			require.Equal(t, slots[2:], logs["bounded"].slots())
			requireSkipped(t, "bounded", StatusSkipped, "missed", slots[1])
			requireSucceeded(t, "bounded", slots[2:]...)
		})
		t.Run("CatchUpWindowBoundsHowFarBack", func(t *testing.T) {
			ran := logs["windowed"].slots()
			require.Equal(t, slots[4], ran[len(ran)-1], "the current slot runs")
			require.NotContains(t, ran, slots[1])
			requireSkipped(t, "windowed", StatusSkipped, "missed: older than CatchUpWindow", slots[1])
		})
		t.Run("LatestOnly", func(t *testing.T) {
			require.Equal(t, slots[3:], logs["latest"].slots())
			requireSkipped(t, "latest", StatusSkipped, "missed", slots[1:3]...)
		})
		t.Run("Skip", func(t *testing.T) {
			require.Equal(t, slots[4:], logs["skip"].slots())
			requireSkipped(t, "skip", StatusSkipped, "missed", slots[1:4]...)
		})
		t.Run("FreshJobDoesNotBackfill", func(t *testing.T) {
			require.Equal(t, slots[4:], logs["fresh"].slots(), "nothing before the first claim")
			for _, at := range slots[:4] {
				require.Empty(t, s.status("fresh", "", at), "slot %v", at)
			}
		})
		t.Run("ManualAwaitsAnOperator", func(t *testing.T) {
			require.Equal(t, slots[4:], logs["manual"].slots())
			requireSkipped(t, "manual", StatusMissed, "missed", slots[1:4]...)
			// A missed slot is done until asked for: a late timer leaves it.
			claimNow(t, sched, "manual", "", slots[2])
			require.Equal(t, StatusMissed, s.status("manual", "", slots[2]))

			require.NoError(t, sched.Start(context.Background()))
			require.NoError(t, sched.Retry(context.Background(), "manual", "", slots[2], "ops ticket 42"))
			eventually(t, 10*time.Second, "the retried slot succeeded", func() bool {
				return s.status("manual", "", slots[2]) == StatusSucceeded
			})
			require.NoError(t, sched.Stop(context.Background()))
			require.Equal(t, []time.Time{slots[4], slots[2]}, logs["manual"].slots(), "exactly once")
			rec := s.record(t, "manual", "", slots[2])
			require.Equal(t, "retry: ops ticket 42", rec.Reason)
			require.Equal(t, 1, rec.Attempt)
			requireSkipped(t, "manual", StatusMissed, "missed", slots[1], slots[3])
		})
	})
}

func TestRetries(t *testing.T) {
	t.Parallel()
	t.Run("BackoffBetweenAttempts", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			const backoff = 100 * time.Millisecond
			at := past(1, 0)[0]
			var log runLog
			watch := &watchedLedger{}
			sched := s.replica(t, watched(watch))
			require.NoError(t, sched.Register(Job{
				Name: "flaky", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second),
				MaxAttempts: 3, RetryBackoff: backoff, RetryMaxBackoff: time.Second,
				Run: func(ctx context.Context, run Run) error {
					defer log.begin(run)()
					if run.Attempt < 3 {
						return fmt.Errorf("attempt %d failed", run.Attempt)
					}
					return nil
				},
			}))
			claimNow(t, sched, "flaky", "", at)
			require.NoError(t, sched.Start(context.Background()))
			eventually(t, 10*time.Second, "the third attempt succeeded", func() bool {
				return s.status("flaky", "", at) == StatusSucceeded
			})
			require.NoError(t, sched.Stop(context.Background()))

			spans := log.allSpans()
			require.Len(t, spans, 3)
			calls := watch.calls()
			require.Len(t, calls, 3)
			for i, sp := range spans {
				require.Equal(t, i+1, sp.run.Attempt)
				require.Equal(t, at, sp.run.At, "one logical run")
				if i == 0 {
					continue
				}
				// RetryBackoff * 2^(attempt-1), -20% jitter at most.
				least := time.Duration(float64(backoff<<(i-1)) * 0.8)
				require.GreaterOrEqual(t, sp.start.Sub(spans[i-1].end), least, "wait before attempt %d", i+1)
				retryAt := calls[i-1].outcome.RetryAt
				require.False(t, sp.start.Before(retryAt), "attempt %d started before its RetryAt", i+1)
				require.LessOrEqual(t, retryAt.Sub(spans[i-1].end), time.Duration(float64(backoff<<(i-1))*1.2)+50*time.Millisecond)
			}
			require.True(t, calls[2].outcome.RetryAt.IsZero())

			rec := s.record(t, "flaky", "", at)
			require.Equal(t, 3, rec.Attempt)
			require.True(t, rec.RetryAt.IsZero())
			require.Len(t, rec.Attempts, 3)
			for i, a := range rec.Attempts[:2] {
				require.Equal(t, StatusFailed, a.Status)
				require.Equal(t, ClassRetryable, a.Class)
				require.Equal(t, fmt.Sprintf("attempt %d failed", i+1), a.Error)
				require.False(t, rec.Attempts[i+1].Started.Before(a.Finished))
			}
			require.Equal(t, StatusSucceeded, rec.Attempts[2].Status)
		})
	})
	t.Run("PermanentErrorIsNotRetried", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			at := past(1, 0)[0]
			var log runLog
			invalid := errors.New("invalid account")
			sched := s.replica(t)
			require.NoError(t, sched.Register(Job{
				Name: "strict", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second),
				RetryBackoff: time.Millisecond,
				Run: func(ctx context.Context, run Run) error {
					log.add(run)
					return fmt.Errorf("settling: %w", Permanent(invalid))
				},
			}))
			claimNow(t, sched, "strict", "", at)
			rec := s.record(t, "strict", "", at)
			require.Equal(t, StatusFailed, rec.Status)
			require.True(t, rec.RetryAt.IsZero())
			a, _ := rec.Latest()
			require.Equal(t, ClassPermanent, a.Class)
			require.Equal(t, "settling: invalid account", a.Error)
			require.Empty(t, s.open(t, "strict", ""))

			// No claim, late or woken, makes another attempt.
			claimNow(t, sched, "strict", "", at)
			claimWake(t, sched, "strict", "")
			require.Equal(t, 1, log.count("", at))

			require.True(t, IsPermanent(Permanent(invalid)))
			require.ErrorIs(t, Permanent(invalid), invalid)
			require.False(t, IsPermanent(invalid))
			require.NoError(t, Permanent(nil))
		})
	})
	t.Run("TimeoutFailsTheAttemptAndIsRetried", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			at := past(1, 0)[0]
			cause := make(chan error, 1)
			sched := s.replica(t)
			require.NoError(t, sched.Register(Job{
				Name: "slow", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second),
				Timeout: 100 * time.Millisecond, RetryBackoff: 50 * time.Millisecond,
				Run: func(ctx context.Context, run Run) error {
					if run.Attempt > 1 {
						return nil
					}
					<-ctx.Done()
					cause <- context.Cause(ctx)
					return ctx.Err()
				},
			}))
			claimNow(t, sched, "slow", "", at)
			require.ErrorIs(t, <-cause, errTimeout)
			rec := s.record(t, "slow", "", at)
			require.Equal(t, StatusFailed, rec.Status)
			a, _ := rec.Latest()
			require.Equal(t, ClassTimeout, a.Class)
			require.False(t, rec.RetryAt.IsZero(), "a timeout is retried")

			require.NoError(t, sched.Start(context.Background()))
			eventually(t, 10*time.Second, "the retry succeeded", func() bool {
				return s.status("slow", "", at) == StatusSucceeded
			})
			require.NoError(t, sched.Stop(context.Background()))
			rec = s.record(t, "slow", "", at)
			require.Equal(t, 2, rec.Attempt)
			require.Equal(t, ClassTimeout, rec.Attempts[0].Class)
			require.Equal(t, StatusSucceeded, rec.Attempts[1].Status)
		})
	})
	t.Run("CrashDuringTheBackoffLosesNothing", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			at := past(1, 0)[0]
			var log runLog
			job := Job{
				Name: "resilient", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second),
				RetryBackoff: 500 * time.Millisecond,
				Run: func(ctx context.Context, run Run) error {
					log.add(run)
					if run.Attempt == 1 {
						return errors.New("bank API down")
					}
					return nil
				},
			}
			// Replica 1 fails the first attempt, then dies in the wait:
			// the wake-up it had set dies with it.
			r1 := s.replica(t)
			require.NoError(t, r1.Register(job))
			claimNow(t, r1, "resilient", "", at)
			failed := s.record(t, "resilient", "", at)
			require.Equal(t, StatusFailed, failed.Status)
			require.True(t, failed.RetryAt.After(time.Now()), "still in the backoff")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			defer cancel()
			_ = r1.Stop(ctx)

			// Replica 2 has later slots: its next claim finds the stored
			// retry time and runs the retry once it has come.
			later := job
			later.EndAt = at.Add(3 * time.Second)
			r2 := s.started(t, later)
			eventually(t, 10*time.Second, "the retry ran on replica 2", func() bool {
				return s.status("resilient", "", at) == StatusSucceeded
			})
			require.NoError(t, r2.Stop(context.Background()))
			rec := s.record(t, "resilient", "", at)
			require.Equal(t, 2, rec.Attempt)
			require.Equal(t, 2, log.count("", at))
			require.NotEqual(t, rec.Attempts[0].Owner, rec.Attempts[1].Owner)
			require.False(t, rec.Attempts[1].Started.Before(failed.RetryAt), "not before RetryAt %v", failed.RetryAt)
		})
	})
	t.Run("UnderForbidARetryNeverOverlapsTheNextSlot", func(t *testing.T) {
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			startAt, endAt, slots := slotWindow(2)
			// The first attempt of slots[0] fails; its retry, 100 ms
			// later, lasts until the replica that does not hold the lease
			// found it held at slots[1]: slots[1] came due during the
			// retry.
			held := make(chan struct{})
			var once sync.Once
			watch := logTo(func(msg string, attrs map[string]string) {
				if msg == "job_claim_skipped" && attrs["reason"] == "lease_held" && attrs["slot"] == slots[1].Format(time.RFC3339) {
					once.Do(func() { close(held) })
				}
			})
			var log runLog
			job := Job{
				Name: "slow-retry", Spec: everySecond, StartAt: startAt, EndAt: endAt,
				RetryBackoff: 100 * time.Millisecond,
				Run: func(ctx context.Context, run Run) error {
					defer log.begin(run)()
					if run.Attempt == 1 {
						return errors.New("first attempt fails")
					}
					timer := time.NewTimer(10 * time.Second)
					defer timer.Stop()
					select {
					case <-held:
						return nil
					case <-ctx.Done():
						return ctx.Err()
					case <-timer.C:
						return errors.New("slots[1] never came due")
					}
				},
			}
			a := s.started(t, job, watch)
			b := s.started(t, job, watch)
			eventually(t, 15*time.Second, "slots[0] retried, slots[1] decided", func() bool {
				return s.status("slow-retry", "", slots[0]) == StatusSucceeded && s.status("slow-retry", "", slots[1]) != ""
			})
			require.NoError(t, a.Stop(context.Background()))
			require.NoError(t, b.Stop(context.Background()))

			log.requireNoOverlap(t)
			require.Equal(t, []time.Time{slots[0], slots[0]}, log.slots(), "slots[1] never ran")
			require.Equal(t, 2, s.record(t, "slow-retry", "", slots[0]).Attempt)
			rec := s.record(t, "slow-retry", "", slots[1])
			require.Equal(t, StatusSkipped, rec.Status, "slots[1] came due during the retry")
			require.Equal(t, "overlap", rec.Reason)
		})
	})
}

func TestKilledMidRunIsAbandonedAndTakenOver(t *testing.T) {
	t.Parallel()
	for name, policy := range map[string]OverlapPolicy{"Forbid": OverlapForbid, "Allow": OverlapAllow} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testKilledMidRun(t, policy)
		})
	}
}

// testKilledMidRun: under OverlapAllow the slot's own lease and fence do
// what the job lease and the pair's fence do otherwise.
func testKilledMidRun(t *testing.T, policy OverlapPolicy) {
	eachBackend(t, func(t *testing.T, s *setup) {
		started, release := make(chan struct{}), make(chan struct{})
		var log runLog
		stuck := Job{
			Name: "stuck", Spec: yearly, LeaseTTL: time.Second, Overlap: policy,
			Run: func(ctx context.Context, run Run) error {
				log.add(run)
				close(started)
				<-release // ignores ctx
				return nil
			},
		}
		watchA := &watchedLedger{}
		a := s.started(t, stuck, watched(watchA))
		slot, err := a.Trigger(context.Background(), "stuck", "", "kill test")
		require.NoError(t, err)
		waitDone(t, started, 10*time.Second, "the run started")
		// Replica a is stopped with a short grace: the run's ctx ends and
		// the lease is released, but the job goes on.
		stopped := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			stopped <- a.Stop(ctx)
		}()

		healthy := stuck
		healthy.Run = func(ctx context.Context, run Run) error { log.add(run); return nil }
		b := s.replica(t)
		require.NoError(t, b.Register(healthy))
		eventually(t, 10*time.Second, "b took the slot over", func() bool {
			claimWake(t, b, "stuck", "")
			return s.status("stuck", "", slot.At) == StatusSucceeded
		})
		rec := s.record(t, "stuck", "", slot.At)
		require.Equal(t, 2, rec.Attempt)
		require.Len(t, rec.Attempts, 2)
		require.Equal(t, StatusAbandoned, rec.Attempts[0].Status, "the next holder marks attempt 1 abandoned")
		require.False(t, rec.Attempts[0].Finished.IsZero())
		require.Equal(t, StatusSucceeded, rec.Attempts[1].Status)
		require.Greater(t, rec.Attempts[1].Token, rec.Attempts[0].Token)

		// The stuck job finally returns: its Finish is fenced off.
		close(release)
		require.ErrorIs(t, <-stopped, context.DeadlineExceeded)
		calls := watchA.calls()
		require.Len(t, calls, 1)
		require.ErrorIs(t, calls[0].err, fence.ErrStaleToken)
		require.Equal(t, policy == OverlapAllow, calls[0].fence.PerSlot, "fenced per slot under OverlapAllow only")
		require.Equal(t, rec, s.record(t, "stuck", "", slot.At), "the late Finish changed nothing")
		runs := log.all()
		require.Len(t, runs, 2)
		require.Equal(t, []int{1, 2}, []int{runs[0].Attempt, runs[1].Attempt})
		require.Equal(t, runs[0].IdempotencyKey, runs[1].IdempotencyKey)
	})
}

func TestHeartbeatRecordsALongRunAlive(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		const ttl = 600 * time.Millisecond // heartbeat every 200 ms
		at := past(1, 0)[0]
		started, release := make(chan struct{}), make(chan struct{})
		sched := s.replica(t)
		require.NoError(t, sched.Register(Job{
			Name: "beating", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second), LeaseTTL: ttl,
			Run: func(ctx context.Context, run Run) error {
				close(started)
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			},
		}))
		done := make(chan struct{})
		go func() {
			defer close(done)
			claimNow(t, sched, "beating", "", at)
		}()
		waitDone(t, started, 10*time.Second, "the run started")
		var first Attempt
		eventually(t, 5*time.Second, "a heartbeat recorded", func() bool {
			a, ok := s.record(t, "beating", "", at).Latest()
			first = a
			return ok && a.Heartbeat.After(a.Started)
		})
		eventually(t, 5*time.Second, "a second heartbeat recorded", func() bool {
			a, _ := s.record(t, "beating", "", at).Latest()
			return a.Heartbeat.After(first.Heartbeat)
		})
		require.Equal(t, StatusRunning, first.Status)
		close(release)
		waitDone(t, done, 10*time.Second, "the claim ended")
		rec := s.record(t, "beating", "", at)
		require.Equal(t, StatusSucceeded, rec.Status)
		a, _ := rec.Latest()
		require.GreaterOrEqual(t, a.Heartbeat.Sub(a.Started), ttl/3-10*time.Millisecond)
		require.False(t, a.Finished.Before(a.Heartbeat))
	})
}

// noCancel hides RedisLedger's Canceler: a ledger that cannot cancel runs.
type noCancel struct{ Ledger }

func TestOverlapCancelOtherNeedsACanceler(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ledger, err := NewRedisLedger(s.rdb, s.ledgerPrefix)
		require.NoError(t, err)
		sched := s.replica(t, func(c *Config) { c.Ledger = noCancel{ledger} })
		err = sched.Register(Job{Name: "x", Spec: everySecond, Overlap: OverlapCancelOther, Run: func(context.Context, Run) error { return nil }})
		require.ErrorIs(t, err, ErrInvalidJob)
	})
}

// Under OverlapCancelOther, the replica that loses the race for a slot
// must not cancel the winner's run of that same slot.
func TestOverlapCancelOtherNeverCancelsTheSameSlot(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		startAt, endAt, slots := slotWindow(1)
		job := Job{
			Name: "alone", Spec: everySecond, StartAt: startAt, EndAt: endAt,
			Overlap: OverlapCancelOther, LeaseTTL: 3 * time.Second,
			Run: func(ctx context.Context, run Run) error {
				timer := time.NewTimer(2500 * time.Millisecond) // past two heartbeats
				defer timer.Stop()
				select {
				case <-ctx.Done():
					return context.Cause(ctx)
				case <-timer.C:
					return nil
				}
			},
		}
		a := s.started(t, job)
		b := s.started(t, job)
		eventually(t, 15*time.Second, "the slot finished", func() bool {
			st := s.status("alone", "", slots[0])
			return st == StatusSucceeded || st == StatusFailed
		})
		require.NoError(t, a.Stop(context.Background()))
		require.NoError(t, b.Stop(context.Background()))
		rec := s.record(t, "alone", "", slots[0])
		require.Equal(t, StatusSucceeded, rec.Status, "%+v", rec.Attempts)
		require.Equal(t, 1, rec.Attempt)

		// At the ledger: a request for the running slot itself cancels
		// nothing; one for a later slot does.
		ctx := context.Background()
		slot := Slot{Job: "ledger-cancel", At: slots[0]}
		f := Fence{Token: 1_700_000_000_000_001, Owner: "holder"}
		n, _, err := s.ledger.Begin(ctx, slot, f, 3, time.Now())
		require.NoError(t, err)
		require.NoError(t, s.ledger.RequestCancel(ctx, "ledger-cancel", "", slots[0]))
		require.NoError(t, s.ledger.Heartbeat(ctx, slot, f, n, time.Now()))
		require.NoError(t, s.ledger.RequestCancel(ctx, "ledger-cancel", "", slots[0].Add(time.Second)))
		require.ErrorIs(t, s.ledger.Heartbeat(ctx, slot, f, n, time.Now()), ErrCancelRequested)
	})
}
