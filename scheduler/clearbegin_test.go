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
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/redislease"
	"github.com/holdfast-go/holdfast/scheduler/cron"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// countingLedger counts State calls and the slots BeginIfClear or the
// joined claim (ClaimAll) began, of the RedisLedger it wraps, keeping both
// visible to the scheduler.
type countingLedger struct {
	*redisledger.Ledger
	mu            sync.Mutex
	states, clear int
}

func (c *countingLedger) State(ctx context.Context, job, partition string, since, now time.Time) (ledger.State, error) {
	c.mu.Lock()
	c.states++
	c.mu.Unlock()
	return c.Ledger.State(ctx, job, partition, since, now)
}

// States counts one State read per request.
func (c *countingLedger) States(ctx context.Context, reqs []ledger.StateRequest, now time.Time) ([]ledger.State, error) {
	c.mu.Lock()
	c.states += len(reqs)
	c.mu.Unlock()
	return c.Ledger.States(ctx, reqs, now)
}

func (c *countingLedger) BeginIfClear(ctx context.Context, reqs []ledger.BeginRequest, now time.Time) []ledger.BeginResult {
	out := c.Ledger.BeginIfClear(ctx, reqs, now)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range out {
		if r.Clear && r.Err == nil {
			c.clear++
		}
	}
	return out
}

// ClaimAll counts the slots the joined claim began as BeginIfClear would.
func (c *countingLedger) ClaimAll(ctx context.Context, leases leasedriver.Backend, reqs []ledger.ClaimRequest, limit int, now time.Time) ([]ledger.ClaimResult, error) {
	out, err := c.Ledger.ClaimAll(ctx, leases, reqs, limit, now)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range out {
		if r.Begin != nil && r.Begin.Clear && r.Begin.Err == nil {
			c.clear++
		}
	}
	return out, err
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
		counting := &countingLedger{Ledger: s.ledger}
		sched := s.replica(t, func(c *Options) { c.Ledger = counting }, onClock(clk))
		require.NoError(t, sched.Register(Job{
			Name: "quick", Spec: everySecond, StartAt: startAt, EndAt: startAt.Add(4 * time.Second),
			Run: func(ctx context.Context, run Run) error { log.add(run); return nil },
		}))
		require.NoError(t, sched.Start(context.Background()))
		tickAll(t, clk, 5*time.Second, 250*time.Millisecond, new(atomic.Int64), sched)
		for _, at := range slots {
			require.Equal(t, ledger.StatusSucceeded, s.status("quick", "", at))
		}
		require.Equal(t, slots, log.slots())
		counting.mu.Lock()
		defer counting.mu.Unlock()
		// Only the recovery claim at Start reads State; every slot,
		// the first too (its earlier fire is computed: none, from
		// StartAt), begins in one call, the one that takes its lease.
		require.Equal(t, len(slots), counting.clear, "slots begun by the joined claim")
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
		// A StartAt off a whole second: the fire at 08:59:59 is before it.
		{"FirstFireAfterAStartAtOffASecond", Job{Spec: everySecond, StartAt: at.Add(-600 * time.Millisecond)}, noFire},
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
		sched.claimHeldNow(sched.newHold(u, l), claimReq{fire: fire, prev: noFire}, time.Now(), nil)
		require.Zero(t, ran)
		require.Equal(t, ledger.Status(""), s.status("late", "", at), "nothing begun")
		require.ErrorIs(t, l.Err(), lease.ErrReleased, "the lease is released")
	})
}

// A replica whose claim of a fire comes late (past its lateness bound,
// under a missed-slot policy that records the slot rather than runs it, so
// the claim plans) and after the slot was recorded takes no lease: the
// joined claim reads the slot before the lease
// (ledger.ClaimRequest.CheckOnly). Without that, every such replica took
// the lease, read State and planned the done slot: a claim's work for
// nothing, which on a loaded host made late claims later still. A late
// fire whose slot is not done is claimed and planned as before.
func TestLateClaimOfADoneSlotTakesNoLease(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		at := past(1, 3*time.Second)[0] // 3 s late: past the 1 s bound of a per-second job
		ran := 0
		job := Job{
			Name: "late", Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second), Missed: MissedSkip,
			Run: func(context.Context, Run) error { ran++; return nil },
		}
		first, second := s.replica(t), s.replica(t)
		require.NoError(t, first.Register(job))
		require.NoError(t, second.Register(job))
		fire, ok := unitOf(t, first, "late", "").job.window.sched.Next(at.Add(-time.Second))
		require.True(t, ok)
		claim := func(sched *Scheduler) (*lease.Lease, *ledger.BeginResult, error) {
			u := unitOf(t, sched, "late", "")
			_, ok := sched.fastRequest(u, claimReq{fire: fire}, time.Now())
			require.False(t, ok, "a late fire under MissedSkip is planned, not begun in the claim")
			e := &entry{at: at, u: u, req: claimReq{fire: fire}}
			leases, errs, pre := sched.acquireAll([]*entry{e}, []string{u.lease}, 1, u.job.LeaseTTL)
			return leases[0], pre[0], errs[0]
		}
		backend, err := redislease.NewBackend(s.rdb, redislease.Options{Prefix: s.leasePrefix})
		require.NoError(t, err)
		tokens := func() string {
			k, err := backend.Keys(ledger.UnitScope("late", ""))
			require.NoError(t, err)
			return s.rdb.Get(context.Background(), k.Fence).Val()
		}

		l, pre, err := claim(first)
		require.NoError(t, err, "not done: the lease is taken")
		require.True(t, pre == nil || !pre.Clear, "nothing begun: the claim plans")
		require.Equal(t, ledger.Status(""), s.status("late", "", at))
		outsideLife(first)
		first.claimHeldNow(first.newHold(unitOf(t, first, "late", ""), l), claimReq{fire: fire}, time.Time{}, pre)
		require.Equal(t, ledger.StatusSkipped, s.status("late", "", at), "recorded by the missed-slot policy")

		before := tokens()
		_, pre, err = claim(second)
		require.ErrorIs(t, err, lease.ErrNotAcquired)
		require.Nil(t, pre)
		require.Equal(t, before, tokens(), "no token issued: the lease was not taken")
		require.Zero(t, ran)
	})
}

// A late fire (past its lateness bound) under MissedCatchUp, the default,
// or MissedLatestOnly, on a unit with nothing else to do, is begun in the
// claim that takes its lease, as an on-time fire is: the planner would run
// it and nothing else (a lone missed slot, the claim's own fire). No
// State is read. Under MissedSkip the claim plans (above).
func TestLateFireUnderCatchUpBeginsWithoutState(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		for _, policy := range []MissedPolicy{MissedCatchUp, MissedLatestOnly} {
			at := past(1, 3*time.Second)[0]
			name := fmt.Sprintf("late%d", policy)
			ran := 0
			counting := &countingLedger{Ledger: s.ledger}
			sched := s.replica(t, func(c *Options) { c.Ledger = counting })
			require.NoError(t, sched.Register(Job{
				Name: name, Spec: everySecond, StartAt: at, EndAt: at.Add(time.Second), Missed: policy,
				Run: func(context.Context, Run) error { ran++; return nil },
			}))
			u := unitOf(t, sched, name, "")
			fire, ok := u.job.window.sched.Next(at.Add(-time.Second))
			require.True(t, ok)
			e := &entry{at: at, u: u, req: claimReq{fire: fire}}
			leases, errs, pre := sched.acquireAll([]*entry{e}, []string{u.lease}, 1, u.job.LeaseTTL)
			require.NoError(t, errs[0])
			require.NotNil(t, pre[0])
			require.Equal(t, ledger.BeginResult{Attempt: 1, Left: 2, Clear: true}, *pre[0], "begun in the claim (3 attempts by default)")
			outsideLife(sched)
			sched.claimHeldNow(sched.newHold(u, leases[0]), claimReq{fire: fire}, time.Time{}, pre[0])
			require.Equal(t, 1, ran)
			require.Equal(t, ledger.StatusSucceeded, s.status(name, "", at))
			counting.mu.Lock()
			require.Zero(t, counting.states, "State calls")
			counting.mu.Unlock()
		}
	})
}
