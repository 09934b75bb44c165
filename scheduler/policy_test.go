package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

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
			testwait.Until(t, 10*time.Second, "the third attempt succeeded", func() bool {
				return s.status("flaky", "", at) == ledger.StatusSucceeded
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
				require.Equal(t, ledger.StatusFailed, a.Status)
				require.Equal(t, ledger.ClassRetryable, a.Class)
				require.Equal(t, fmt.Sprintf("attempt %d failed", i+1), a.Error)
				require.False(t, rec.Attempts[i+1].Started.Before(a.Finished))
			}
			require.Equal(t, ledger.StatusSucceeded, rec.Attempts[2].Status)
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
			require.Equal(t, ledger.StatusFailed, rec.Status)
			require.True(t, rec.RetryAt.IsZero())
			a, _ := rec.Latest()
			require.Equal(t, ledger.ClassPermanent, a.Class)
			require.Equal(t, "settling: invalid account", a.Error)
			require.Empty(t, s.open(t, "strict", ""))

			// No claim, late or woken, makes another attempt.
			claimNow(t, sched, "strict", "", at)
			claimWake(t, sched, "strict", "")
			require.Equal(t, 1, log.count("", at))

			require.ErrorIs(t, Permanent(invalid), ErrPermanent)
			require.ErrorIs(t, Permanent(invalid), invalid)
			require.NotErrorIs(t, invalid, ErrPermanent)
			require.NoError(t, Permanent(nil))
		})
	})
	t.Run("ScopeMismatchIsNotRetried", func(t *testing.T) {
		// A sink that fences what the job writes under another lease
		// refuses every attempt alike (pgfence.ErrScopeMismatch wraps
		// fence.ErrScopeMismatch): the first attempt fails for good.
		t.Parallel()
		eachBackend(t, func(t *testing.T, s *setup) {
			at := past(1, 0)[0]
			var log runLog
			sched := s.replica(t)
			require.NoError(t, sched.Register(Job{
				Name: "scoped", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second),
				MaxAttempts: 3, RetryBackoff: time.Millisecond,
				Run: func(ctx context.Context, run Run) error {
					log.add(run)
					return fmt.Errorf("%w: row accounts/1 has token 9 of scope %q, not %q", pgfence.ErrScopeMismatch, "other", run.Scope)
				},
			}))
			claimNow(t, sched, "scoped", "", at)
			rec := s.record(t, "scoped", "", at)
			require.Equal(t, ledger.StatusFailed, rec.Status)
			require.True(t, rec.RetryAt.IsZero(), "no retry is planned")
			a, _ := rec.Latest()
			require.Equal(t, ledger.ClassPermanent, a.Class)
			require.Empty(t, s.open(t, "scoped", ""))
			claimNow(t, sched, "scoped", "", at)
			claimWake(t, sched, "scoped", "")
			require.Equal(t, 1, log.count("", at))
			require.ErrorIs(t, pgfence.ErrScopeMismatch, fence.ErrScopeMismatch)
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
			require.Equal(t, ledger.StatusFailed, rec.Status)
			a, _ := rec.Latest()
			require.Equal(t, ledger.ClassTimeout, a.Class)
			require.False(t, rec.RetryAt.IsZero(), "a timeout is retried")

			require.NoError(t, sched.Start(context.Background()))
			testwait.Until(t, 10*time.Second, "the retry succeeded", func() bool {
				return s.status("slow", "", at) == ledger.StatusSucceeded
			})
			require.NoError(t, sched.Stop(context.Background()))
			rec = s.record(t, "slow", "", at)
			require.Equal(t, 2, rec.Attempt)
			require.Equal(t, ledger.ClassTimeout, rec.Attempts[0].Class)
			require.Equal(t, ledger.StatusSucceeded, rec.Attempts[1].Status)
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
			require.Equal(t, ledger.StatusFailed, failed.Status)
			require.True(t, failed.RetryAt.After(time.Now()), "still in the backoff")
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			defer cancel()
			_ = r1.Stop(ctx)

			// Replica 2 has later slots: its next claim finds the stored
			// retry time and runs the retry once it has come.
			later := job
			later.EndAt = at.Add(3 * time.Second)
			r2 := s.started(t, later)
			testwait.Until(t, 10*time.Second, "the retry ran on replica 2", func() bool {
				return s.status("resilient", "", at) == ledger.StatusSucceeded
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
			startAt := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
			slots := []time.Time{startAt, startAt.Add(time.Second)}
			clk := clock.NewFake(startAt.Add(-500 * time.Millisecond))
			// The first attempt of slots[0] fails; its retry, 100 ms
			// later, lasts until the test lets it end, after slots[1]
			// came due (on fake time): slots[1] came due during the retry.
			held, returned := make(chan struct{}), make(chan struct{})
			var blocked atomic.Int64
			var log runLog
			job := Job{
				Name: "slow-retry", Spec: everySecond, StartAt: startAt, EndAt: startAt.Add(2 * time.Second),
				RetryBackoff: 100 * time.Millisecond,
				Run: func(ctx context.Context, run Run) error {
					defer log.begin(run)()
					if run.Attempt == 1 {
						return errors.New("first attempt fails")
					}
					defer close(returned)
					blocked.Add(1)
					defer blocked.Add(-1)
					select {
					case <-held:
						return nil
					case <-ctx.Done():
						return ctx.Err()
					}
				},
			}
			a := s.started(t, job, onClock(clk))
			b := s.started(t, job, onClock(clk))
			tickAll(t, clk, 2*time.Second, 50*time.Millisecond, &blocked, a, b) // to 10:00:01.5
			close(held)
			<-returned
			tickAll(t, clk, time.Second, 50*time.Millisecond, &blocked, a, b)
			require.Equal(t, ledger.StatusSucceeded, s.status("slow-retry", "", slots[0]))

			log.requireNoOverlap(t)
			require.Equal(t, []time.Time{slots[0], slots[0]}, log.slots(), "slots[1] never ran")
			require.Equal(t, 2, s.record(t, "slow-retry", "", slots[0]).Attempt)
			rec := s.record(t, "slow-retry", "", slots[1])
			require.Equal(t, ledger.StatusSkipped, rec.Status, "slots[1] came due during the retry")
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
		testwait.Done(t, started, 10*time.Second, "the run started")
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
		testwait.Until(t, 10*time.Second, "b took the slot over", func() bool {
			claimWake(t, b, "stuck", "")
			return s.status("stuck", "", slot.At) == ledger.StatusSucceeded
		})
		rec := s.record(t, "stuck", "", slot.At)
		require.Equal(t, 2, rec.Attempt)
		require.Len(t, rec.Attempts, 2)
		require.Equal(t, ledger.StatusAbandoned, rec.Attempts[0].Status, "the next holder marks attempt 1 abandoned")
		require.False(t, rec.Attempts[0].Finished.IsZero())
		require.Equal(t, ledger.StatusSucceeded, rec.Attempts[1].Status)
		require.Greater(t, rec.Attempts[1].Token, rec.Attempts[0].Token)

		// The stuck job finally returns: its Finish is fenced off.
		close(release)
		require.ErrorIs(t, <-stopped, context.DeadlineExceeded)
		calls := watchA.calls()
		require.Len(t, calls, 1)
		require.ErrorIs(t, calls[0].err, fence.ErrStaleToken)
		wantScope := "stuck"
		if policy == OverlapAllow {
			wantScope = ledger.SlotScope(slot)
		}
		require.Equal(t, wantScope, calls[0].fence.Scope, "fenced by the slot lease under OverlapAllow only")
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
		testwait.Done(t, started, 10*time.Second, "the run started")
		var first ledger.Attempt
		testwait.Until(t, 5*time.Second, "a heartbeat recorded", func() bool {
			a, ok := s.record(t, "beating", "", at).Latest()
			first = a
			return ok && a.Heartbeat.After(a.Started)
		})
		testwait.Until(t, 5*time.Second, "a second heartbeat recorded", func() bool {
			a, _ := s.record(t, "beating", "", at).Latest()
			return a.Heartbeat.After(first.Heartbeat)
		})
		require.Equal(t, ledger.StatusRunning, first.Status)
		close(release)
		testwait.Done(t, done, 10*time.Second, "the claim ended")
		rec := s.record(t, "beating", "", at)
		require.Equal(t, ledger.StatusSucceeded, rec.Status)
		a, _ := rec.Latest()
		require.GreaterOrEqual(t, a.Heartbeat.Sub(a.Started), ttl/3-10*time.Millisecond)
		require.False(t, a.Finished.Before(a.Heartbeat))
	})
}

// noCancel hides RedisLedger's Canceler: a ledger that cannot cancel runs.
type noCancel struct{ ledger.Ledger }

func TestOverlapCancelOtherNeedsACanceler(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ledger, err := redisledger.New(s.rdb, redisledger.Options{Prefix: s.ledgerPrefix})
		require.NoError(t, err)
		sched := s.replica(t, func(c *Options) { c.Ledger = noCancel{ledger} })
		err = sched.Register(Job{Name: "x", Spec: everySecond, Overlap: OverlapCancelOther, Run: func(context.Context, Run) error { return nil }})
		require.ErrorIs(t, err, ErrInvalidJob)
	})
}
