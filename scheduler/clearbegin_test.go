package scheduler

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler/cron"
)

// BeginIfClear begins a slot in one round trip only when State would show
// nothing else to plan; otherwise it changes nothing.
func TestRedisLedgerBeginIfClear(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		l := s.ledger
		base := time.Now().Truncate(time.Second).Add(-time.Hour)
		at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) }
		since := base.Add(-time.Hour)
		now := time.Now()
		f := Fence{Token: 1_000, Owner: "a"}
		slot := func(job string, i int) Slot { return Slot{Job: job, At: at(i)} }

		// A job the ledger never saw: clear, attempt 1.
		n, left, clear, err := beginIfClear(ctx, l, slot("fresh", 1), f, 3, at(0), since, now)
		require.NoError(t, err)
		require.True(t, clear)
		require.Equal(t, []int{1, 2}, []int{n, left})
		require.Equal(t, StatusRunning, s.status("fresh", "", at(1)))
		st, err := l.State(ctx, "fresh", "", since, time.Now())
		require.NoError(t, err)
		require.False(t, st.Horizon.IsZero(), "the horizon is set as State sets it")
		requireSameTime(t, at(1), st.Last)

		// The next slot while slot 1 still runs (its holder lost the
		// lease): slot 1 is open, so not clear, and nothing changes.
		n, _, clear, err = beginIfClear(ctx, l, slot("fresh", 2), Fence{Token: 1_001, Owner: "b"}, 3, at(1), since, now)
		require.NoError(t, err)
		require.False(t, clear)
		require.Zero(t, n)
		require.Equal(t, "", string(s.status("fresh", "", at(2))), "slot 2 untouched")
		require.Equal(t, StatusRunning, s.status("fresh", "", at(1)))

		// Slot 1 succeeds: slot 2 is clear.
		require.NoError(t, l.Finish(ctx, slot("fresh", 1), f, 1, Outcome{Status: StatusSucceeded}, now))
		n, _, clear, err = beginIfClear(ctx, l, slot("fresh", 2), f, 3, at(1), since, now)
		require.NoError(t, err)
		require.True(t, clear)
		require.Equal(t, 1, n)
		require.NoError(t, l.Finish(ctx, slot("fresh", 2), f, 1, Outcome{Status: StatusSucceeded}, now))

		// A gap: slot 3 was never begun, so slot 4 is not clear.
		_, _, clear, err = beginIfClear(ctx, l, slot("fresh", 4), f, 3, at(3), since, now)
		require.NoError(t, err)
		require.False(t, clear, "slot 3 went unseen")

		// A slot already done: clear, ErrSlotDone.
		_, _, clear, err = beginIfClear(ctx, l, slot("fresh", 2), f, 3, at(1), since, now)
		require.ErrorIs(t, err, ErrSlotDone)
		require.True(t, clear)

		// A stale token: clear, *fence.StaleTokenError, nothing begun.
		_, _, clear, err = beginIfClear(ctx, l, slot("fresh", 3), Fence{Token: 999, Owner: "old"}, 3, at(2), since, now)
		var stale *fence.StaleTokenError
		require.ErrorAs(t, err, &stale)
		require.True(t, clear)
		require.Equal(t, "", string(s.status("fresh", "", at(3))))

		// Paused: not clear.
		require.NoError(t, l.SetPaused(ctx, "fresh", true))
		_, _, clear, err = beginIfClear(ctx, l, slot("fresh", 3), f, 3, at(2), since, now)
		require.NoError(t, err)
		require.False(t, clear, "paused")
		require.NoError(t, l.SetPaused(ctx, "fresh", false))

		// A pending slot (an operator's request): not clear.
		require.NoError(t, l.Request(ctx, slot("fresh", 1), "again", now))
		_, _, clear, err = beginIfClear(ctx, l, slot("fresh", 3), f, 3, at(2), since, now)
		require.NoError(t, err)
		require.False(t, clear, "slot 1 pending")

		// The slot itself waiting for its retry time: not clear; once
		// the time has come: clear, attempt 2.
		g := Fence{Token: 2_000, Owner: "c"}
		_, _, _, err = beginIfClear(ctx, l, slot("retry", 1), g, 3, time.Time{}, since, now)
		require.NoError(t, err)
		retryAt := now.Add(time.Minute).Truncate(time.Millisecond)
		require.NoError(t, l.Finish(ctx, slot("retry", 1), g, 1, Outcome{Status: StatusFailed, Class: ClassRetryable, Error: "x", RetryAt: retryAt}, now))
		_, _, clear, err = beginIfClear(ctx, l, slot("retry", 1), g, 3, at(0), since, now)
		require.NoError(t, err)
		require.False(t, clear, "waiting for its retry")
		n, left, clear, err = beginIfClear(ctx, l, slot("retry", 1), g, 3, at(0), since, retryAt.Add(time.Millisecond))
		require.NoError(t, err)
		require.True(t, clear)
		require.Equal(t, []int{2, 1}, []int{n, left})
	})
}

// A batch of requests is one pipeline; each request gets its own answer,
// and after SCRIPT FLUSH the batch still answers.
func TestRedisLedgerBeginIfClearBatch(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		l := s.ledger
		at := time.Now().Truncate(time.Second).Add(-time.Minute).UTC()
		since, now := at.Add(-time.Hour), time.Now()
		f := Fence{Token: 5_000, Owner: "a"}
		// "done" succeeded; "stale" was raised by token 6,000; "gap" last
		// saw a slot two seconds back, with the one between unseen.
		for _, job := range []string{"done", "stale", "gap"} {
			s.seed(t, Slot{Job: job, At: at.Add(-2 * time.Second)}, StatusSucceeded)
		}
		_, _, err := l.Begin(ctx, Slot{Job: "done", At: at}, Fence{Token: 5_500, Owner: "x"}, 3, now)
		require.NoError(t, err)
		require.NoError(t, l.Finish(ctx, Slot{Job: "done", At: at}, Fence{Token: 5_500, Owner: "x"}, 1, Outcome{Status: StatusSucceeded}, now))
		require.NoError(t, l.Skip(ctx, Slot{Job: "stale", At: at.Add(-time.Second)}, Fence{Token: 6_000, Owner: "y"}, StatusSkipped, "x", now))

		require.NoError(t, s.rdb.ScriptFlush(ctx).Err())
		reqs := []BeginRequest{
			{Slot: Slot{Job: "fresh", At: at}, Fence: f, MaxAttempts: 3, Prev: at.Add(-time.Second), Since: since},
			{Slot: Slot{Job: "done", At: at}, Fence: Fence{Token: 5_600, Owner: "a"}, MaxAttempts: 3, Prev: at.Add(-time.Second), Since: since},
			{Slot: Slot{Job: "stale", At: at}, Fence: f, MaxAttempts: 3, Prev: at.Add(-time.Second), Since: since},
			{Slot: Slot{Job: "gap", At: at}, Fence: f, MaxAttempts: 3, Prev: at.Add(-time.Second), Since: since},
			{Slot: Slot{Job: "perslot", At: at}, Fence: Fence{Token: 5_000, Owner: "a", PerSlot: true}, MaxAttempts: 3, Prev: at.Add(-time.Second), Since: since},
		}
		out := l.BeginIfClear(ctx, reqs, now)
		require.Len(t, out, len(reqs))
		require.Equal(t, BeginResult{Attempt: 1, Left: 2, Clear: true}, out[0], "fresh")
		require.True(t, out[1].Clear, "done")
		require.ErrorIs(t, out[1].Err, ErrSlotDone)
		require.True(t, out[2].Clear, "stale")
		var stale *fence.StaleTokenError
		require.ErrorAs(t, out[2].Err, &stale)
		require.Equal(t, fence.Token(6_000), stale.Current)
		require.Equal(t, BeginResult{}, out[3], "gap: not clear")
		require.Equal(t, BeginResult{}, out[4], "per-slot fences plan")
		require.Equal(t, StatusRunning, s.status("fresh", "", at))
		require.Equal(t, Status(""), s.status("gap", "", at))
		require.Equal(t, Status(""), s.status("stale", "", at))
	})
}

// beginIfClear is one request of BeginIfClear.
func beginIfClear(ctx context.Context, l *RedisLedger, slot Slot, f Fence, maxAttempts int, prev, since, now time.Time) (attempt, left int, clear bool, err error) {
	r := l.BeginIfClear(ctx, []BeginRequest{{Slot: slot, Fence: f, MaxAttempts: maxAttempts, Prev: prev, Since: since}}, now)[0]
	return r.Attempt, r.Left, r.Clear, r.Err
}

func requireSameTime(t *testing.T, want, got time.Time) {
	t.Helper()
	require.True(t, want.Equal(got), "want %v, got %v", want, got)
}

// countingLedger counts State and BeginIfClear calls of the RedisLedger it
// wraps, keeping BeginIfClear visible to the scheduler.
type countingLedger struct {
	*RedisLedger
	mu            sync.Mutex
	states, clear int
}

func (c *countingLedger) State(ctx context.Context, job, partition string, since, now time.Time) (State, error) {
	c.mu.Lock()
	c.states++
	c.mu.Unlock()
	return c.RedisLedger.State(ctx, job, partition, since, now)
}

func (c *countingLedger) BeginIfClear(ctx context.Context, reqs []BeginRequest, now time.Time) []BeginResult {
	out := c.RedisLedger.BeginIfClear(ctx, reqs, now)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range out {
		if r.Clear && r.Err == nil {
			c.clear++
		}
	}
	return out
}

// After the first, every scheduled slot of a replica running alone is
// begun in the round trip that reads the ledger: no State.
func TestScheduledSlotsBeginWithoutState(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		startAt := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
		slots := []time.Time{startAt, startAt.Add(time.Second), startAt.Add(2 * time.Second), startAt.Add(3 * time.Second)}
		clk := clock.NewFake(startAt.Add(-500 * time.Millisecond))
		var log runLog
		counting := &countingLedger{RedisLedger: s.ledger}
		sched := s.replica(t, func(c *Config) { c.Ledger = counting }, onClock(clk))
		require.NoError(t, sched.Register(Job{
			Name: "quick", Spec: everySecond, StartAt: startAt, EndAt: startAt.Add(4 * time.Second),
			Run: func(ctx context.Context, run Run) error { log.add(run); return nil },
		}))
		require.NoError(t, sched.Start(context.Background()))
		tickAll(t, clk, 5*time.Second, 250*time.Millisecond, new(atomic.Int64), sched)
		for _, at := range slots {
			require.Equal(t, StatusSucceeded, s.status("quick", "", at))
		}
		require.Equal(t, slots, log.slots())
		counting.mu.Lock()
		defer counting.mu.Unlock()
		// Only the recovery claim at Start reads State; every slot,
		// the first too (its earlier fire is computed: none, from
		// StartAt), begins in one call.
		require.Equal(t, len(slots), counting.clear, "slots begun by BeginIfClear")
		require.Equal(t, 1, counting.states, "State calls")
	})
}

func TestPrevFire(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 9, 9, 0, 0, 0, time.UTC) // a Monday
	run := func(context.Context, Run) error { return nil }
	for _, tc := range []struct {
		name string
		job  Job
		want time.Time
	}{
		{"EverySecond", Job{Spec: everySecond}, at.Add(-time.Second)},
		{"Daily", Job{Spec: "0 9 * * *"}, at.AddDate(0, 0, -1)},
		{"Every90s", Job{Spec: "@every 90s"}, at.Add(-90 * time.Second)},
		// Friday's fire is three days back, the next one day ahead:
		// not found within twice that, so unknown.
		{"WeekdaysUnknownAfterAWeekend", Job{Spec: "0 9 * * MON-FRI"}, time.Time{}},
		{"FirstFireAtStartAt", Job{Spec: "0 9 * * *", StartAt: at}, noFire},
		// Every second of one hour a day, at the hour's last second: the
		// next fire is 23 h ahead, the window back holds more fires than
		// Between returns, so the last one is unknown (not an older one).
		{"DenseUnevenUnknown", Job{Spec: "* * 9 * * *"}, time.Time{}},
		{"SecondFireAfterStartAt", Job{Spec: everySecond, StartAt: at.Add(-time.Second)}, at.Add(-time.Second)},
		{"NewYorkAcrossSpringForward", Job{Spec: "0 3 * * *", Zone: "America/New_York"},
			time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)}, // 03:00 EDT on the 9th follows 03:00 EDT (run after the gap) on the 8th
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.job.Name, tc.job.Run = "j"+tc.name, run
			job := tc.job.withDefaults()
			cs, err := cron.Parse(job.Spec, cron.Options{Zone: job.Zone})
			require.NoError(t, err)
			r := &registered{Job: job, window: newWindow(cs, job)}
			fire := at
			if tc.name == "DenseUnevenUnknown" {
				fire = at.Add(time.Hour - time.Second)
			}
			if tc.job.Zone != "" {
				f, ok := cs.Next(at.Add(-24 * time.Hour))
				require.True(t, ok)
				fire = f.At
			}
			got := r.window.prev(fire)
			require.True(t, tc.want.Equal(got), "prevFire(%v) = %v, want %v", fire, got, tc.want)
		})
	}
}

// A claim that holds the lease after claiming stopped (Stop was called
// while its batch was in flight) begins nothing, on the fast path too.
func TestClaimAfterStopBeginsNothing(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		at := past(1, 0)[0]
		ran := 0
		sched := s.replica(t)
		require.NoError(t, sched.Register(Job{
			Name: "late", Spec: everySecond, StartAt: at,
			Run: func(context.Context, Run) error { ran++; return nil },
		}))
		u := unitOf(t, sched, "late", "")
		fire, ok := u.job.window.sched.Next(at.Add(-time.Second))
		require.True(t, ok)
		l, err := sched.cfg.Leases.TryAcquire(context.Background(), u.lease, u.job.LeaseTTL)
		require.NoError(t, err)
		stopped, stop := context.WithCancel(context.Background())
		stop()
		sched.life.claim = stopped
		sched.claimHeld(newHold(u, l), claimReq{fire: fire, prev: noFire}, time.Now(), nil)
		require.Zero(t, ran)
		require.Equal(t, Status(""), s.status("late", "", at), "nothing begun")
		require.ErrorIs(t, l.Err(), lease.ErrReleased, "the lease is released")
	})
}

// Fenced transitions go through the ledger's auto-pipeline: after SCRIPT
// FLUSH each still runs once (EVAL), and concurrent claims' transitions
// all land.
func TestRedisLedgerTransitionsAfterScriptFlushAndUnderLoad(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		at := time.Now().Truncate(time.Second).UTC()
		require.NoError(t, s.rdb.ScriptFlush(ctx).Err())
		f := Fence{Token: 7_000, Owner: "a"}
		slot := Slot{Job: "flushed", At: at}
		n, left, err := s.ledger.Begin(ctx, slot, f, 3, time.Now())
		require.NoError(t, err)
		require.Equal(t, []int{1, 2}, []int{n, left})
		require.NoError(t, s.ledger.Heartbeat(ctx, slot, f, 1, time.Now()))
		require.NoError(t, s.ledger.Finish(ctx, slot, f, 1, Outcome{Status: StatusSucceeded}, time.Now()))
		require.Equal(t, StatusSucceeded, s.status("flushed", "", at))
		rec := s.record(t, "flushed", "", at)
		require.Len(t, rec.Attempts, 1, "each transition ran once")

		const claims = 48
		var wg sync.WaitGroup
		errs := make(chan error, claims)
		for i := range claims {
			wg.Go(func() {
				sl := Slot{Job: "load", At: at, Partition: fmt.Sprintf("p%02d", i)}
				g := Fence{Token: fence.Token(8_000 + i), Owner: fmt.Sprintf("o%d", i)}
				n, _, err := s.ledger.Begin(ctx, sl, g, 3, time.Now())
				if err == nil {
					err = s.ledger.Finish(ctx, sl, g, n, Outcome{Status: StatusSucceeded}, time.Now())
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		for i := range claims {
			require.Equal(t, StatusSucceeded, s.status("load", fmt.Sprintf("p%02d", i), at))
		}
		require.True(t, s.ledger.pipe.Idle())
	})
}

// A Finish the client sends twice (a pipeline re-sent after a lost reply
// or TRYAGAIN) is answered as recorded the second time; a different
// outcome for the ended attempt is still refused.
func TestRedisLedgerFinishSentTwice(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		slot := Slot{Job: "twice", At: time.Now().Truncate(time.Second).UTC()}
		f := Fence{Token: 9_000, Owner: "a"}
		n, _, err := s.ledger.Begin(ctx, slot, f, 3, time.Now())
		require.NoError(t, err)
		ok := Outcome{Status: StatusSucceeded}
		require.NoError(t, s.ledger.Finish(ctx, slot, f, n, ok, time.Now()))
		require.NoError(t, s.ledger.Finish(ctx, slot, f, n, ok, time.Now()), "the same call again")
		err = s.ledger.Finish(ctx, slot, f, n, Outcome{Status: StatusFailed, Class: ClassRetryable, Error: "x"}, time.Now())
		require.ErrorIs(t, err, fence.ErrStaleToken, "another outcome for an ended attempt")
		rec := s.record(t, "twice", "", slot.At)
		require.Equal(t, StatusSucceeded, rec.Status)
		require.Len(t, rec.Attempts, 1)
	})
}
