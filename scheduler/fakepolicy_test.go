package scheduler_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/cron"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// The policy tests on fake time: each runs against every ledger
// (fakeLedgers), and no test waits for a wall-clock second.

// gated is a job function whose runs of the slots in hold wait until the
// test releases them (or their ctx ends); it records every run and how it
// ended.
type gated struct {
	held    *atomic.Int64 // the rig's count of blocked job functions
	mu      sync.Mutex
	runs    []scheduler.Run
	causes  map[time.Time]error
	hold    map[time.Time]chan struct{}
	done    map[time.Time]chan struct{} // closed when a held run returns
	failFor int                         // the first failFor attempts of each slot fail
}

func newGated(r *rig, hold ...time.Time) *gated {
	g := &gated{held: &r.held, causes: map[time.Time]error{}, hold: map[time.Time]chan struct{}{}, done: map[time.Time]chan struct{}{}}
	for _, at := range hold {
		g.hold[at], g.done[at] = make(chan struct{}), make(chan struct{})
	}
	return g
}

func (g *gated) run(ctx context.Context, run scheduler.Run) error {
	g.mu.Lock()
	g.runs = append(g.runs, run)
	wait, done, fail := g.hold[run.At], g.done[run.At], run.Attempt <= g.failFor
	g.mu.Unlock()
	if wait != nil {
		defer close(done)
		g.held.Add(1)
		defer g.held.Add(-1)
		select {
		case <-wait:
		case <-ctx.Done():
			g.mu.Lock()
			g.causes[run.At] = context.Cause(ctx)
			g.mu.Unlock()
			return ctx.Err()
		}
	}
	if fail {
		return errors.New("flaky")
	}
	return nil
}

// release lets the held run of at return, and waits until it has (the
// scheduler then has work in flight, which settle waits for).
func (g *gated) release(t *testing.T, at time.Time) {
	t.Helper()
	close(g.hold[at])
	select {
	case <-g.done[at]:
	case <-time.After(10 * time.Second):
		t.Fatalf("the run of %v did not return", at)
	}
}

func (g *gated) slots() []time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]time.Time, len(g.runs))
	for i, r := range g.runs {
		out[i] = r.At
	}
	return out
}

func (g *gated) all() []scheduler.Run {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]scheduler.Run(nil), g.runs...)
}

func (g *gated) cause(at time.Time) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.causes[at]
}

func TestFakeTimeOverlapPolicies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		policy  scheduler.OverlapPolicy
		ran     []time.Time
		skipped []time.Time
	}{
		// A run of 10:00 lasts until 10:02:30: 10:01 and 10:02 come due
		// during it.
		{"ForbidSkipsThem", scheduler.OverlapForbid,
			[]time.Time{utc(10, 0, 0), utc(10, 3, 0)}, []time.Time{utc(10, 1, 0), utc(10, 2, 0)}},
		{"BufferOneRunsTheLatestAfterTheRun", scheduler.OverlapBufferOne,
			[]time.Time{utc(10, 0, 0), utc(10, 2, 0), utc(10, 3, 0)}, []time.Time{utc(10, 1, 0)}},
		{"AllowRunsThemAlongside", scheduler.OverlapAllow,
			[]time.Time{utc(10, 0, 0), utc(10, 1, 0), utc(10, 2, 0), utc(10, 3, 0)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			onFakeTime(t, utc(9, 59, 58), func(t *testing.T, r *rig) {
				g := newGated(r, utc(10, 0, 0))
				job := scheduler.Job{Name: "long", Spec: "* * * * *", Overlap: tc.policy, Run: g.run}
				r.replica(0, job)
				r.replica(0, job)
				r.tick(152*time.Second, time.Second) // to 10:02:30
				g.release(t, utc(10, 0, 0))
				r.settle()
				r.tick(40*time.Second, time.Second) // to 10:03:10
				require.Equal(t, tc.ran, g.slots())
				tokens := map[uint64]bool{}
				for _, at := range tc.ran {
					rec := r.record("long", at)
					require.Equal(t, ledger.StatusSucceeded, rec.Status, "slot %v", at)
					require.Equal(t, 1, rec.Attempt, "slot %v ran once", at)
					tokens[uint64(rec.Attempts[0].Token)] = true
				}
				if tc.policy == scheduler.OverlapAllow {
					require.Len(t, tokens, len(tc.ran), "each slot under a lease of its own")
				}
				for _, run := range g.all() {
					scope := "long" // the unit lease: the job, default partition
					if tc.policy == scheduler.OverlapAllow {
						scope = "long@" + strconv.FormatInt(run.At.Unix(), 10) // the slot lease
					}
					require.Equal(t, scope, run.Scope, "the token's scope is the lease it was issued for")
					require.Equal(t, fence.Holder{Scope: scope, Token: run.Token, Owner: run.Owner}, run.Holder())
				}
				for _, at := range tc.skipped {
					rec := r.record("long", at)
					require.Equal(t, ledger.StatusSkipped, rec.Status, "slot %v", at)
					require.Equal(t, "overlap", rec.Reason)
					require.Empty(t, rec.Attempts, "slot %v never ran", at)
				}
			})
		})
	}
}

// OverlapCancelOther: the run of 10:00 is replaced when 10:01 comes due,
// on the same replica or another.
func TestFakeTimeOverlapCancelOther(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(9, 59, 58), func(t *testing.T, r *rig) {
		skipWithoutCanceler(t, r)
		g := newGated(r, utc(10, 0, 0))
		job := scheduler.Job{Name: "replace", Spec: "* * * * *", Overlap: scheduler.OverlapCancelOther, Run: g.run}
		r.replica(0, job)
		r.replica(300*time.Millisecond, job) // loses the race for 10:00 and asks to cancel it
		r.tick(30*time.Second, 100*time.Millisecond)
		require.Equal(t, []time.Time{utc(10, 0, 0)}, g.slots())
		require.NoError(t, g.cause(utc(10, 0, 0)), "a replica that lost the race for the same slot cancels nothing")
		require.Equal(t, ledger.StatusRunning, r.record("replace", utc(10, 0, 0)).Status)
		r.tick(35*time.Second, 100*time.Millisecond) // to 10:01:03
		require.Equal(t, []time.Time{utc(10, 0, 0), utc(10, 1, 0)}, g.slots())
		require.ErrorIs(t, g.cause(utc(10, 0, 0)), scheduler.ErrInterrupted)
		rec := r.record("replace", utc(10, 0, 0))
		a, _ := rec.Latest()
		require.Equal(t, ledger.StatusFailed, rec.Status)
		require.Equal(t, 1, rec.Attempt, "a replaced run is not retried")
		require.True(t, rec.RetryAt.IsZero())
		require.Equal(t, ledger.ClassInterrupted, a.Class)
		require.Contains(t, a.Error, "replaced by a newer slot")
		require.Equal(t, ledger.StatusSucceeded, r.record("replace", utc(10, 1, 0)).Status)
	})
}

// slowBeats is the Redis ledger with every heartbeat answered late (in real
// time): a slow server, or a host too busy to run the heartbeat at once.
type slowBeats struct {
	*redisledger.Ledger
	delay time.Duration
}

// Heartbeat answers delay late, or when ctx ends (a run that ended does not
// wait for its last heartbeat's answer).
func (l slowBeats) Heartbeat(ctx context.Context, s ledger.Slot, f ledger.Fence, attempt int, now time.Time) error {
	err := l.Ledger.Heartbeat(ctx, s, f, attempt, now)
	late := time.NewTimer(l.delay) // the latency injected
	defer late.Stop()
	select {
	case <-late.C:
	case <-ctx.Done():
	}
	return err
}

// OverlapCancelOther with heartbeats that take real time: the test rig
// settles only once a heartbeat whose timer fired has been answered, so
// the replacement is seen on the scheduler's clock as it would be with
// fast heartbeats (the fake clock does not run ahead of the heartbeat).
// Control: without the heartbeats counted in quiet (attempt.go's beats and
// active), the clock reached 10:01:03 with the 10:01 slot not run.
func TestFakeTimeOverlapCancelOtherSlowHeartbeat(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(10, 0, 50), func(t *testing.T, r *rig) {
		rl, ok := r.ledger.(*redisledger.Ledger)
		if !ok {
			t.Skip("OverlapCancelOther needs a Canceler; only the Redis ledger is one")
		}
		r.ledger = slowBeats{Ledger: rl, delay: 20 * time.Millisecond}
		g := newGated(r, utc(10, 1, 0))
		job := scheduler.Job{Name: "replace", Spec: "* * * * *", Overlap: scheduler.OverlapCancelOther, Run: g.run}
		r.replica(0, job)
		r.replica(300*time.Millisecond, job)
		r.tick(12*time.Second, 100*time.Millisecond) // to 10:01:02
		require.Equal(t, []time.Time{utc(10, 1, 0)}, g.slots())
		r.tick(63*time.Second, 100*time.Millisecond) // to 10:02:05
		require.Equal(t, []time.Time{utc(10, 1, 0), utc(10, 2, 0)}, g.slots())
		require.ErrorIs(t, g.cause(utc(10, 1, 0)), scheduler.ErrInterrupted)
		require.Equal(t, ledger.StatusSucceeded, r.record("replace", utc(10, 2, 0)).Status)
	})
}

// Retries wait RetryBackoff (doubling, ±20% jitter) on the scheduler's
// clock, and the slot succeeds on its third attempt.
func TestFakeTimeRetriesBackOff(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(10, 0, 0).Add(-500*time.Millisecond), func(t *testing.T, r *rig) {
		g := newGated(r)
		g.failFor = 2
		r.replica(0, scheduler.Job{Name: "flaky", Spec: "0 0 10 * * *", RetryBackoff: 10 * time.Second, Run: g.run})
		r.tick(7*time.Second, 500*time.Millisecond)
		require.Len(t, g.slots(), 1, "the retry waits at least 8 s")
		r.tick(6*time.Second, 500*time.Millisecond) // to 10:00:12.5
		require.Len(t, g.slots(), 2)
		r.tick(13*time.Second, 500*time.Millisecond) // second wait: 16 s at least
		require.Len(t, g.slots(), 2)
		r.tick(14*time.Second, 500*time.Millisecond) // to 10:00:39.5, past 12 + 24
		rec := r.record("flaky", utc(10, 0, 0))
		require.Equal(t, ledger.StatusSucceeded, rec.Status)
		require.Equal(t, 3, rec.Attempt)
		require.Len(t, g.slots(), 3)
	})
}

// Pause stops every replica; on Resume the missed-slot policy decides.
func TestFakeTimePauseAndResume(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(9, 59, 58), func(t *testing.T, r *rig) {
		g, skip := newGated(r), newGated(r)
		job := scheduler.Job{Name: "paused", Spec: "* * * * *", Missed: scheduler.MissedLatestOnly, Run: g.run}
		other := scheduler.Job{Name: "skipping", Spec: "* * * * *", Missed: scheduler.MissedSkip, Run: skip.run}
		a := r.replica(0, job, other)
		r.replica(0, job, other)
		r.tick(5*time.Second, time.Second)
		require.NoError(t, a.Pause(context.Background(), "paused"))
		require.NoError(t, a.Pause(context.Background(), "skipping"))
		r.tick(3*time.Minute, time.Second) // 10:01..10:03 come due, paused
		require.Equal(t, []time.Time{utc(10, 0, 0)}, g.slots(), "no replica runs a paused job")
		for _, at := range []time.Time{utc(10, 1, 0), utc(10, 3, 0)} {
			_, found, err := r.ledger.Get(context.Background(), ledger.Slot{Job: "paused", At: at})
			require.NoError(t, err)
			require.False(t, found, "a paused slot is not recorded: it is still due")
		}
		require.NoError(t, a.Resume(context.Background(), "paused", false))
		require.NoError(t, a.Resume(context.Background(), "skipping", false))
		r.settle()
		require.Equal(t, []time.Time{utc(10, 0, 0), utc(10, 3, 0)}, g.slots(), "the latest missed slot runs on resume")
		require.Equal(t, []time.Time{utc(10, 0, 0)}, skip.slots(), "MissedSkip runs none of them")
		for _, at := range []time.Time{utc(10, 1, 0), utc(10, 2, 0)} {
			require.Equal(t, ledger.StatusSkipped, r.record("paused", at).Status)
			require.Equal(t, ledger.StatusSkipped, r.record("skipping", at).Status)
		}
		r.tick(time.Minute, time.Second)
		require.Equal(t, utc(10, 4, 0), skip.slots()[1], "then on schedule again")
	})
}

// Issue 37, 4: Resume with skipPaused records the paused slots skipped, whatever
// Job.Missed says (here the default, catch-up, which Resume follows and
// runs them all), and the job runs on schedule again.
func TestFakeTimeResumeSkipping(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(9, 59, 58), func(t *testing.T, r *rig) {
		g, caught := newGated(r), newGated(r)
		job := scheduler.Job{Name: "billing", Spec: "* * * * *", Partitions: []string{"eu", "us"}, Run: g.run}
		other := scheduler.Job{Name: "catching", Spec: "* * * * *", Run: caught.run}
		a := r.replica(0, job, other)
		r.replica(0, job, other)
		r.tick(5*time.Second, time.Second)
		ctx := context.Background()
		require.NoError(t, a.Pause(ctx, "billing"))
		require.NoError(t, a.Pause(ctx, "catching"))
		r.tick(3*time.Minute, time.Second) // 10:01..10:03 come due, paused
		require.NoError(t, a.Resume(ctx, "billing", true))
		require.NoError(t, a.Resume(ctx, "catching", false))
		r.settle()
		require.Equal(t, []time.Time{utc(10, 0, 0), utc(10, 0, 0)}, g.slots(), "no paused slot runs, in either partition")
		require.Equal(t, []time.Time{utc(10, 0, 0), utc(10, 1, 0), utc(10, 2, 0), utc(10, 3, 0)}, caught.slots(),
			"Resume catches them up (MissedCatchUp)")
		for _, p := range []string{"eu", "us"} {
			for _, at := range []time.Time{utc(10, 1, 0), utc(10, 2, 0), utc(10, 3, 0)} {
				rec, found, err := r.ledger.Get(ctx, ledger.Slot{Job: "billing", At: at, Partition: p})
				require.NoError(t, err)
				require.True(t, found)
				require.Equal(t, ledger.StatusSkipped, rec.Status)
				require.Equal(t, "paused", rec.Reason)
			}
		}
		st, err := a.JobStatus(ctx, "billing")
		require.NoError(t, err)
		require.False(t, st.Paused)
		require.Equal(t, 6, st.Skipped, "3 slots x 2 partitions, counted by JobStatus")
		r.tick(time.Minute, time.Second)
		require.Equal(t, []time.Time{utc(10, 0, 0), utc(10, 0, 0), utc(10, 4, 0), utc(10, 4, 0)}, g.slots(), "then on schedule again")
	})
}

// Operator requests on fake time: Trigger makes a slot of the clock's
// current second, Backfill and Retry reuse slots of the schedule.
func TestFakeTimeOperatorRequests(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(10, 0, 30), func(t *testing.T, r *rig) {
		g := newGated(r)
		s := r.replica(0, scheduler.Job{Name: "ops", Spec: "0 * * * * *", Run: g.run})
		ctx := context.Background()
		slot, err := s.Trigger(ctx, "ops", "", "by hand")
		require.NoError(t, err)
		require.Equal(t, utc(10, 0, 30), slot.At, "the fake clock's second")
		r.settle()
		backfilled, err := s.Backfill(ctx, "ops", "", utc(9, 58, 0), utc(10, 0, 0), "late data")
		require.NoError(t, err)
		require.Len(t, backfilled, 2)
		r.settle()
		require.NoError(t, s.Retry(ctx, "ops", "", utc(9, 58, 0), "again"))
		r.settle()
		require.Equal(t, []time.Time{utc(10, 0, 30), utc(9, 58, 0), utc(9, 59, 0), utc(9, 58, 0)}, g.slots())
		rec := r.record("ops", utc(9, 58, 0))
		require.Equal(t, 2, rec.Attempt)
		require.Equal(t, "retry: again", rec.Reason)
	})
}

// Stop lets a run finish within the grace period; past it the run's ctx
// ends with ErrInterrupted and the attempt is recorded interrupted.
func TestFakeTimeShutdown(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(9, 59, 59), func(t *testing.T, r *rig) {
		g := newGated(r, utc(10, 0, 0))
		s := r.replica(0, scheduler.Job{Name: "stop", Spec: "0 0 10 * * *", Run: g.run})
		r.tick(2*time.Second, time.Second)
		require.Equal(t, []time.Time{utc(10, 0, 0)}, g.slots())
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // no grace
		require.ErrorIs(t, s.Stop(ctx), context.Canceled)
		require.ErrorIs(t, g.cause(utc(10, 0, 0)), scheduler.ErrInterrupted)
		rec := r.record("stop", utc(10, 0, 0))
		a, _ := rec.Latest()
		require.Equal(t, ledger.StatusFailed, rec.Status)
		require.Equal(t, ledger.ClassInterrupted, a.Class)
	})
}

// A restart after downtime: the slots due while no replica ran (10:01 to
// 10:05) follow the missed-slot policy.
func TestFakeTimeRestartFollowsTheMissedPolicy(t *testing.T) {
	t.Parallel()
	skipped, missed := ledger.StatusSkipped, ledger.StatusMissed
	for _, tc := range []struct {
		name string
		edit func(*scheduler.Job)
		ran  []time.Time // after 10:00
		rest ledger.Status
		why  string
	}{
		{"CatchUpRunsThemOldestFirst", func(*scheduler.Job) {},
			[]time.Time{utc(10, 1, 0), utc(10, 2, 0), utc(10, 3, 0), utc(10, 4, 0), utc(10, 5, 0)}, "", ""},
		{"CatchUpKeepsTheMaxCatchUpLatest", func(j *scheduler.Job) { j.MaxCatchUp = 2 },
			[]time.Time{utc(10, 4, 0), utc(10, 5, 0)}, skipped, "missed"},
		{"CatchUpWindowBoundsHowFarBack", func(j *scheduler.Job) { j.CatchUpWindow = 150 * time.Second },
			[]time.Time{utc(10, 3, 0), utc(10, 4, 0), utc(10, 5, 0)}, skipped, "missed: older than CatchUpWindow"},
		{"LatestOnly", func(j *scheduler.Job) { j.Missed = scheduler.MissedLatestOnly },
			[]time.Time{utc(10, 5, 0)}, skipped, "missed"},
		{"Skip", func(j *scheduler.Job) { j.Missed = scheduler.MissedSkip }, nil, skipped, "missed"},
		{"ManualAwaitsAnOperator", func(j *scheduler.Job) { j.Missed = scheduler.MissedManual }, nil, missed, "missed: awaits an operator"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			onFakeTime(t, utc(9, 59, 58), func(t *testing.T, r *rig) {
				g := newGated(r)
				job := scheduler.Job{Name: "down", Spec: "* * * * *", Run: g.run}
				tc.edit(&job)
				a := r.replica(0, job)
				r.tick(5*time.Second, time.Second)
				stopOnFakeTime(r.clk, a, context.Background())
				r.scheds = nil
				r.clk.Advance(5 * time.Minute) // down until 10:05:03
				b := r.replica(0, job)
				want := append([]time.Time{utc(10, 0, 0)}, tc.ran...)
				require.Equal(t, want, g.slots())
				for at := utc(10, 1, 0); !at.After(utc(10, 5, 0)); at = at.Add(time.Minute) {
					rec := r.record("down", at)
					if slices.Contains(tc.ran, at) {
						require.Equal(t, ledger.StatusSucceeded, rec.Status, "slot %v", at)
						continue
					}
					require.Equal(t, tc.rest, rec.Status, "slot %v", at)
					require.Equal(t, tc.why, rec.Reason, "slot %v", at)
					require.Empty(t, rec.Attempts)
				}
				if tc.rest == missed {
					require.NoError(t, b.Retry(context.Background(), "down", "", utc(10, 2, 0), "by hand"))
					r.settle()
					require.Equal(t, []time.Time{utc(10, 0, 0), utc(10, 2, 0)}, g.slots(), "a missed slot runs when asked")
				}
			})
		})
	}
}

// A job the ledger never saw starts at its first fire: no backfill of the
// time before it existed.
func TestFakeTimeNewJobDoesNotBackfill(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(10, 0, 30), func(t *testing.T, r *rig) {
		g := newGated(r)
		r.replica(0, scheduler.Job{Name: "fresh", Spec: "* * * * *", Run: g.run})
		r.tick(time.Minute, time.Second)
		require.Equal(t, []time.Time{utc(10, 1, 0)}, g.slots())
		_, found, err := r.ledger.Get(context.Background(), ledger.Slot{Job: "fresh", At: utc(10, 0, 0)})
		require.NoError(t, err)
		require.False(t, found)
	})
}

// Partitions: each (slot, partition) runs once, under a lease of its own,
// across replicas.
func TestFakeTimePartitionsRunEachSlotOnce(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(9, 59, 58), func(t *testing.T, r *rig) {
		var mu sync.Mutex
		runs := map[string]int{}
		job := scheduler.Job{Name: "tenants", Spec: "* * * * * *", Partitions: []string{"eu", "us", "ap"},
			Run: func(_ context.Context, run scheduler.Run) error {
				mu.Lock()
				defer mu.Unlock()
				runs[run.IdempotencyKey]++
				return nil
			}}
		r.replica(0, job)
		r.replica(250*time.Millisecond, job)
		r.tick(5*time.Second, 250*time.Millisecond) // 09:59:59 .. 10:00:03
		mu.Lock()
		defer mu.Unlock()
		for at := utc(9, 59, 59); !at.After(utc(10, 0, 3)); at = at.Add(time.Second) {
			for _, p := range job.Partitions {
				slot := ledger.Slot{Job: "tenants", At: at, Partition: p}
				require.Equal(t, 1, runs[slot.Key()], "slot %v", slot)
				rec, found, err := r.ledger.Get(context.Background(), slot)
				require.NoError(t, err)
				require.True(t, found)
				require.Equal(t, ledger.StatusSucceeded, rec.Status)
				require.Equal(t, 1, rec.Attempt)
			}
		}
	})
}

// Under OverlapAllow the runs of missed slots start at once, beyond
// MaxConcurrentClaims: an attempt is never begun and left waiting.
func TestFakeTimeOverlapAllowRunsAreNotBoundedByThePool(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(9, 59, 58), func(t *testing.T, r *rig) {
		g := newGated(r, utc(10, 0, 0), utc(10, 0, 1), utc(10, 0, 2))
		job := scheduler.Job{Name: "wide", Spec: "* * * * * *", Overlap: scheduler.OverlapAllow, StartAt: utc(10, 0, 0), Run: g.run}
		r.replicaWith(0, func(c *scheduler.Options) { c.MaxConcurrentClaims = 1 }, job)
		r.tick(3*time.Second, 500*time.Millisecond) // to 10:00:01
		require.Equal(t, []time.Time{utc(10, 0, 0), utc(10, 0, 1)}, g.slots(), "both run at once, the first still running")
		r.tick(time.Second, 500*time.Millisecond)
		require.Len(t, g.slots(), 3)
		for _, at := range []time.Time{utc(10, 0, 0), utc(10, 0, 1), utc(10, 0, 2)} {
			require.Equal(t, ledger.StatusRunning, r.record("wide", at).Status)
			g.release(t, at)
		}
		r.settle()
		for _, at := range []time.Time{utc(10, 0, 0), utc(10, 0, 1), utc(10, 0, 2)} {
			require.Equal(t, ledger.StatusSucceeded, r.record("wide", at).Status)
		}
	})
}

// Replicas whose clocks disagree by 400 ms claim the same slots: each
// runs once.
func TestFakeTimeSkewedReplicasRunEachSlotOnce(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(9, 59, 58), func(t *testing.T, r *rig) {
		g := newGated(r)
		job := scheduler.Job{Name: "skew", Spec: "* * * * * *", Run: g.run}
		r.replica(0, job)
		r.replica(400*time.Millisecond, job)
		r.replica(-300*time.Millisecond, job)
		r.tick(10*time.Second, 100*time.Millisecond) // to 10:00:08
		ran := g.slots()
		for i := 1; i < len(ran); i++ {
			require.True(t, ran[i].After(ran[i-1]), "each slot once, in order: %v", ran)
		}
		for at := utc(9, 59, 59); !at.After(utc(10, 0, 7)); at = at.Add(time.Second) {
			require.Contains(t, ran, at)
			rec := r.record("skew", at)
			require.Equal(t, ledger.StatusSucceeded, rec.Status)
			require.Equal(t, 1, rec.Attempt)
			a, ok := rec.Latest()
			require.True(t, ok)
			require.NotZero(t, a.Token)
			require.Len(t, a.Owner, 32)
			require.False(t, a.Finished.Before(a.Started))
		}
	})
}

// DST end to end, on fake time across the transitions of New York in
// 2026: each fixed-time slot runs once, with the rule that produced it.
func TestFakeTimeDST(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, spec string
		from       time.Time // the fake clock starts here
		want       []time.Time
		rule       cron.Rule
	}{
		// Spring forward: 02:00 EST becomes 03:00 EDT on 2026-03-08;
		// 02:30 does not exist and runs once, at the transition.
		{"SpringForwardGapRunsOnceAfter", "30 2 * * *", time.Date(2026, 3, 8, 6, 59, 57, 0, time.UTC),
			[]time.Time{time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)}, cron.RuleGapRunAfter},
		// Fall back: 02:00 EDT becomes 01:00 EST on 2026-11-01; 01:30
		// happens twice and runs at the first.
		{"FallBackOverlapRunsTheFirst", "30 1 * * *", time.Date(2026, 11, 1, 5, 29, 57, 0, time.UTC),
			[]time.Time{time.Date(2026, 11, 1, 5, 30, 0, 0, time.UTC)}, cron.RuleFoldFirst},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			onFakeTime(t, tc.from, func(t *testing.T, r *rig) {
				var runs []scheduler.Run
				var mu sync.Mutex
				r.replica(0, scheduler.Job{Name: "dst", Spec: tc.spec, Zone: "America/New_York",
					Run: func(_ context.Context, run scheduler.Run) error {
						mu.Lock()
						defer mu.Unlock()
						runs = append(runs, run)
						return nil
					}})
				r.tick(5*time.Second, time.Second)
				r.advanceTo(tc.from.Add(time.Hour + 57*time.Second)) // the second pass of the overlap
				r.tick(5*time.Second, time.Second)
				mu.Lock()
				defer mu.Unlock()
				require.Len(t, runs, len(tc.want))
				for i, at := range tc.want {
					require.Equal(t, at, runs[i].At)
					require.Equal(t, tc.rule, runs[i].Rule)
					require.Equal(t, "America/New_York", runs[i].Zone)
				}
			})
		})
	}
}

// A trigger is a run of its own (issue 37): at the second of a scheduled
// slot that already succeeded it does not rerun that slot under its
// idempotency key (it is refused, ErrTriggerTaken); a second later it
// runs anew, under a key no scheduled slot has; a second trigger in that
// same second is refused too.
func TestFakeTimeTriggerNeverReplaysAScheduledSlot(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(10, 0, 29), func(t *testing.T, r *rig) {
		g := newGated(r)
		s := r.replica(0, scheduler.Job{Name: "every2", Spec: "*/2 * * * * *", Run: g.run})
		ctx := context.Background()
		r.tick(time.Second, time.Second) // 10:00:30, a slot of the schedule
		require.Equal(t, []time.Time{utc(10, 0, 30)}, g.slots())
		require.Equal(t, ledger.StatusSucceeded, r.record("every2", utc(10, 0, 30)).Status)

		_, err := s.Trigger(ctx, "every2", "", "push")
		require.ErrorIs(t, err, scheduler.ErrTriggerTaken)
		require.ErrorIs(t, err, scheduler.ErrInvalidArgument)
		r.settle()
		require.Equal(t, []time.Time{utc(10, 0, 30)}, g.slots(), "the succeeded slot is not run again")
		require.Equal(t, 1, r.record("every2", utc(10, 0, 30)).Attempt)

		r.clk.Advance(time.Second) // 10:00:31: no slot of the schedule
		slot, err := s.Trigger(ctx, "every2", "", "push")
		require.NoError(t, err)
		require.Equal(t, utc(10, 0, 31), slot.At)
		r.settle()
		require.Equal(t, []time.Time{utc(10, 0, 30), utc(10, 0, 31)}, g.slots(), "the trigger ran anew")
		scheduled := ledger.Slot{Job: "every2", At: utc(10, 0, 30)}
		require.NotEqual(t, scheduled.IdempotencyKey(), slot.IdempotencyKey())
		rec := r.record("every2", utc(10, 0, 31))
		require.Equal(t, ledger.StatusSucceeded, rec.Status)
		require.Equal(t, "trigger: push", rec.Reason)

		_, err = s.Trigger(ctx, "every2", "", "again")
		require.ErrorIs(t, err, scheduler.ErrTriggerTaken, "a second trigger in the same second would share the first's key")
	})
}

// OverlapCancelOther when the next slot comes due within LeaseTTL + 1 s
// (found by a fresh user's trial: every 2 s with LeaseTTL 3 s, no run was
// ever replaced; the overlapping slots were skipped as under
// OverlapForbid): on one replica, whose own fire finds its unit busy with
// the run, and on two, where the replica that lost the race for the
// running slot waited for the lease past the next fire, which it then only
// noted; it now stops waiting once the slot it lost is recorded begun.
// Control: without the request of a busy unit's fire (trigger) the
// one-replica case runs 10:00:00 to its end; without the loser's check of
// the slot's record (replaceHolder) its claim is still waiting at
// 10:00:01.
func TestFakeTimeOverlapCancelOtherWithinTheLeaseTTL(t *testing.T) {
	t.Parallel()
	for _, replicas := range []int{1, 2} {
		t.Run(strconv.Itoa(replicas), func(t *testing.T) {
			t.Parallel()
			onFakeTime(t, utc(9, 59, 58), func(t *testing.T, r *rig) {
				skipWithoutCanceler(t, r)
				g := newGated(r, utc(10, 0, 0))
				job := scheduler.Job{Name: "replace", Spec: "*/2 * * * * *", LeaseTTL: 3 * time.Second,
					Overlap: scheduler.OverlapCancelOther, Run: g.run}
				var logs lockedLog // both replicas'
				for i := range replicas {
					r.replicaWith(time.Duration(i)*300*time.Millisecond, func(o *scheduler.Options) {
						o.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
					}, job)
				}
				r.tick(3*time.Second, 100*time.Millisecond) // to 10:00:01
				require.Equal(t, []time.Time{utc(10, 0, 0)}, g.slots())
				require.NoError(t, g.cause(utc(10, 0, 0)), "nothing replaces the run before the next slot")
				if replicas == 2 {
					require.Contains(t, logs.String(), `"msg":"job_claim_skipped","job":"replace","partition":"","slot":"`+utc(10, 0, 0).Format(time.RFC3339)+`","reason":"lease_held"`,
						"the loser of 10:00:00 stopped waiting for the lease")
				}
				r.tick(4*time.Second, 100*time.Millisecond) // to 10:00:05
				require.ErrorIs(t, g.cause(utc(10, 0, 0)), scheduler.ErrInterrupted, "a newer slot replaced the run")
				rec := r.record("replace", utc(10, 0, 0))
				a, _ := rec.Latest()
				require.Contains(t, a.Error, "replaced by a newer slot")
				// The replacement runs; which one depends on when the
				// replaced job function returned on the rig's clock
				// (10:00:02, or 10:00:04 with 10:00:02 skipped as overlap).
				slots := g.slots()
				require.GreaterOrEqual(t, len(slots), 2, "a newer slot ran")
				require.Contains(t, []time.Time{utc(10, 0, 2), utc(10, 0, 4)}, slots[1])
				require.Equal(t, ledger.StatusSucceeded, r.record("replace", slots[1]).Status)
				if slots[1].Equal(utc(10, 0, 4)) {
					two := r.record("replace", utc(10, 0, 2))
					require.Equal(t, ledger.StatusSkipped, two.Status)
					require.Equal(t, "overlap", two.Reason)
				}
			})
		})
	}
}

// lockedLog is a log's output, safe for concurrent writes.
type lockedLog struct {
	mu  sync.Mutex
	buf []byte
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	return len(p), nil
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}

// timedRun is a job function whose runs take d on the rig's fake clock,
// logging how each ended and when it began ("<slot> ok from <begun>" or
// "<slot> killed: <cause> from <begun>", times "15:04:05.0").
func timedRun(r *rig, d time.Duration, log *lockedLog) func(context.Context, scheduler.Run) error {
	return func(ctx context.Context, run scheduler.Run) error {
		tm := r.clk.NewTimer(d)
		defer tm.Stop()
		r.held.Add(1)
		defer r.held.Add(-1)
		from := " from " + r.clk.Now().Format("15:04:05.0") + "\n"
		select {
		case <-tm.C():
			_, _ = log.Write([]byte(run.At.Format("15:04:05") + " ok" + from))
			return nil
		case <-ctx.Done():
			_, _ = log.Write([]byte(run.At.Format("15:04:05") + " killed: " + context.Cause(ctx).Error() + from))
			return ctx.Err()
		}
	}
}

// A cancel request replaces only an attempt that a later slot came due
// during (found by review: the ledger keeps the latest replacing slot, so
// every attempt of an older slot begun after it was killed at its first
// heartbeat). Here an operator's Backfill of 09:59, made after 10:00's run
// was replaced by 10:01, runs to its end. Control: without
// beater.overtaken it is killed as "replaced by a newer slot".
func TestFakeTimeOverlapCancelOtherSparesALaterBackfill(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(9, 59, 58), func(t *testing.T, r *rig) {
		skipWithoutCanceler(t, r)
		var log lockedLog
		long, short := timedRun(r, 90*time.Second, &log), timedRun(r, 3*time.Second, &log)
		job := scheduler.Job{Name: "bf", Spec: "0 * * * * *", Overlap: scheduler.OverlapCancelOther,
			Run: func(ctx context.Context, run scheduler.Run) error {
				if run.At.Equal(utc(10, 0, 0)) {
					return long(ctx, run)
				}
				return short(ctx, run)
			}}
		s := r.replica(0, job)
		r.tick(130*time.Second, 100*time.Millisecond) // to 10:02:08
		require.Contains(t, log.String(), "10:00:00 killed: scheduler: run interrupted: replaced by a newer slot (OverlapCancelOther) from 10:00:00")
		_, err := s.Backfill(context.Background(), "bf", "", utc(9, 59, 0), utc(10, 0, 0), "late data")
		require.NoError(t, err)
		r.settle()
		r.tick(10*time.Second, 100*time.Millisecond) // to 10:02:18
		require.Contains(t, log.String(), "09:59:00 ok from 10:02:", "no slot came due during the backfilled run")
	})
}

// Catch-up after all replicas were down: the claim's plan, made before
// 10:05 came due, runs 10:01 to 10:04 in order, 3 s each from 10:04:53;
// 10:05 may replace the run it came due during, and the steps begun after
// it (10:04 at least) run to their end, then 10:05. Control: without
// beater.overtaken 10:04 is killed a second after it began.
func TestFakeTimeOverlapCancelOtherDuringACatchUp(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(9, 59, 58), func(t *testing.T, r *rig) {
		skipWithoutCanceler(t, r)
		var log lockedLog
		job := scheduler.Job{Name: "down", Spec: "0 * * * * *", Overlap: scheduler.OverlapCancelOther, Run: timedRun(r, 3*time.Second, &log)}
		a := r.replica(0, job)
		r.tick(10*time.Second, 100*time.Millisecond) // 10:00 runs
		stopOnFakeTime(r.clk, a, context.Background())
		r.scheds = nil
		r.clk.Advance(utc(10, 4, 53).Sub(r.clk.Now())) // every replica down until 10:04:53
		r.replica(0, job)
		r.tick(20*time.Second, 100*time.Millisecond) // to 10:05:13
		got := log.String()
		for _, want := range []string{"10:01:00 ok", "10:02:00 ok", "10:04:00 ok from 10:05:", "10:05:00 ok"} {
			require.Contains(t, got, want)
		}
		require.NotContains(t, got, "killed: scheduler: run interrupted: replaced by a newer slot (OverlapCancelOther) from 10:05", "no run begun after 10:05 is replaced")
	})
}

// Retry of a slot still to come is a request that it runs when it comes
// due, not before (a fresh user's trial found the pending record and no
// word in the doc): here 10:05, asked for at 10:00:30, runs at 10:05 once,
// as attempt 1.
func TestFakeTimeRetryOfASlotToComeRunsWhenDue(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(10, 0, 30), func(t *testing.T, r *rig) {
		g := newGated(r)
		s := r.replica(0, scheduler.Job{Name: "ahead", Spec: "0 */5 * * * *", Run: g.run})
		require.NoError(t, s.Retry(context.Background(), "ahead", "", utc(10, 5, 0), "early"))
		r.settle()
		r.tick(4*time.Minute, time.Second) // to 10:04:30
		require.Empty(t, g.slots(), "not before it comes due")
		r.tick(time.Minute, time.Second) // to 10:05:30
		require.Equal(t, []time.Time{utc(10, 5, 0)}, g.slots())
		rec := r.record("ahead", utc(10, 5, 0))
		require.Equal(t, ledger.StatusSucceeded, rec.Status)
		require.Equal(t, 1, rec.Attempt)
	})
}

// skipWithoutCanceler skips an OverlapCancelOther test on a ledger that
// cannot cancel runs (pgledger).
func skipWithoutCanceler(t *testing.T, r *rig) {
	t.Helper()
	if _, ok := r.ledger.(ledger.Canceler); !ok {
		t.Skip("OverlapCancelOther needs a Canceler; only the Redis ledger is one")
	}
}

// A backfilled slot older than CatchUpWindow gets its MaxAttempts: its
// retries, due within the window, run (they were left out of State as
// older than the window: the record showed a retry time that never came,
// a fresh user's trial). A scheduled slot's retry due within the window
// runs too, whatever the slot's age; one whose retry time passed the
// window does not.
func TestFakeTimeBackfilledOldSlotIsRetried(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(10, 0, 30), func(t *testing.T, r *rig) {
		var mu sync.Mutex
		calls := map[time.Time]int{}
		old := utc(8, 0, 0) // two hours back: older than the default 1 h window
		s := r.replica(0, scheduler.Job{Name: "bf", Spec: "0 0 * * * *", MaxAttempts: 3,
			RetryBackoff: time.Second, RetryMaxBackoff: time.Second,
			Run: func(_ context.Context, run scheduler.Run) error {
				mu.Lock()
				defer mu.Unlock()
				calls[run.At]++
				if run.At.Equal(old) && calls[run.At] < 3 {
					return errors.New("bank down")
				}
				return nil
			}})
		backfilled, err := s.Backfill(context.Background(), "bf", "", old, old.Add(time.Second), "late data")
		require.NoError(t, err)
		require.Len(t, backfilled, 1)
		r.settle()
		r.tick(10*time.Second, time.Second)
		rec := r.record("bf", old)
		require.Equal(t, ledger.StatusSucceeded, rec.Status, "retried to success: %+v", rec)
		require.Equal(t, 3, rec.Attempt)
		mu.Lock()
		require.Equal(t, 3, calls[old])
		mu.Unlock()
	})
}
