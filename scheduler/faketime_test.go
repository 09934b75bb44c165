package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/ledgertest"
	"github.com/holdfast-go/holdfast/scheduler/ledger/pgledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// rig is the per-test bundle of a fake-time test: one fake clock every
// replica reads (skewed per replica when asked), a shared ledger, and
// leases on Redis (real time: their TTLs outlast any test, which takes
// milliseconds of real time).
type rig struct {
	t      *testing.T
	clk    *clock.Fake
	ledger ledger.Ledger
	leases *lease.Client
	scheds []*scheduler.Scheduler
	held   atomic.Int64 // job functions blocked by the test (gated)
}

// fakeLedgers are the ledgers every fake-time test runs against: the
// in-memory one, the Redis one on real Redis and on miniredis, and the
// Postgres one.
func fakeLedgers() []string { return []string{"memory", "redis", "miniredis", "postgres"} }

// onFakeTime runs fn on a fresh rig per ledger, in parallel, the fake
// clock starting at start.
func onFakeTime(t *testing.T, start time.Time, fn func(t *testing.T, r *rig)) {
	t.Helper()
	for _, name := range fakeLedgers() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var rdb = redistest.Mini(t)
			if name == "redis" {
				rdb = redistest.Real(t)
			}
			prefix := redistest.Prefix(t, rdb)
			leases, err := lease.New(rdb, lease.Options{Prefix: prefix + "lease:"})
			require.NoError(t, err)
			r := &rig{t: t, clk: clock.NewFake(start), leases: leases}
			switch name {
			case "memory":
				r.ledger = ledgertest.NewMemory()
			case "postgres":
				r.ledger = pgLedger(t)
			default:
				r.ledger, err = redisledger.New(rdb, redisledger.Options{Prefix: prefix + "ledger:"})
				require.NoError(t, err)
			}
			fn(t, r)
		})
	}
}

// skewed is a replica's clock that reads offset away from the shared one.
type skewed struct {
	*clock.Fake
	offset time.Duration
}

func (s skewed) Now() time.Time { return s.Fake.Now().Add(s.offset) }

// replica returns a started Scheduler of jobs whose clock reads the rig's
// fake clock plus skew; it is stopped when the test ends.
func (r *rig) replica(skew time.Duration, jobs ...scheduler.Job) *scheduler.Scheduler {
	r.t.Helper()
	return r.replicaWith(skew, func(*scheduler.Options) {}, jobs...)
}

// replicaWith is replica with edit applied to its Options.
func (r *rig) replicaWith(skew time.Duration, edit func(*scheduler.Options), jobs ...scheduler.Job) *scheduler.Scheduler {
	r.t.Helper()
	var c clock.Clock = r.clk
	if skew != 0 {
		c = skewed{r.clk, skew}
	}
	cfg := scheduler.Options{Leases: r.leases, Ledger: r.ledger, Clock: c, Jitter: rand.NewPCG(1, 2)}
	edit(&cfg)
	s, err := scheduler.New(cfg)
	require.NoError(r.t, err)
	for _, j := range jobs {
		require.NoError(r.t, s.Register(j))
	}
	require.NoError(r.t, s.Start(context.Background()))
	r.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stopOnFakeTime(r.clk, s, ctx)
	})
	r.scheds = append(r.scheds, s)
	r.settle()
	return s
}

// stopOnFakeTime stops s, moving the fake clock on while Stop waits on it
// (interruptWait).
func stopOnFakeTime(clk *clock.Fake, s *scheduler.Scheduler, ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Stop(ctx)
	}()
	for {
		select {
		case <-done:
			return
		case <-time.After(10 * time.Millisecond):
			clk.Advance(time.Second)
		}
	}
}

// settle waits until every replica of the rig is quiet: dispatchers idle
// and nothing in flight but the job functions the test holds (r.held). It
// polls every 200 µs (a fake-time test settles thousands of times), failing
// after 30 s: a step settles in milliseconds, but on a busy 2-core machine
// under -race a step of a miniredis rig was seen to take more than 10 s.
func (r *rig) settle() {
	r.t.Helper()
	quiet := func() bool {
		var busy int64
		for _, s := range r.scheds {
			idle, b := s.Quiet()
			if !idle {
				return false
			}
			busy += b
		}
		return busy == r.held.Load()
	}
	if testwait.Poll(30*time.Second, 200*time.Microsecond, func() error {
		if quiet() {
			return nil
		}
		return errors.New("not quiet")
	}) != nil {
		var states []string
		for i, s := range r.scheds {
			idle, b := s.Quiet()
			states = append(states, fmt.Sprintf("replica %d idle=%v busy=%d %s", i, idle, b, s.QuietState()))
		}
		_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		r.t.Fatalf("the replicas settle: not within 30s at %v: %v, held %d", r.clk.Now(), states, r.held.Load())
	}
}

// tick moves the fake clock forward by d in steps of at most step,
// letting the replicas settle after each: time passing smoothly.
func (r *rig) tick(d, step time.Duration) {
	r.t.Helper()
	for d > 0 {
		s := min(d, step)
		r.clk.Advance(s)
		d -= s
		r.settle()
	}
}

// advanceTo moves the fake clock to at in one step (nothing may come due
// meanwhile, or it comes due late, as in a freeze) and settles.
func (r *rig) advanceTo(at time.Time) {
	r.t.Helper()
	r.clk.Advance(at.Sub(r.clk.Now()))
	r.settle()
}

// record returns the ledger's record of the slot of job at at.
func (r *rig) record(job string, at time.Time) ledger.Record {
	r.t.Helper()
	rec, found, err := r.ledger.Get(context.Background(), ledger.Slot{Job: job, At: at})
	require.NoError(r.t, err)
	require.True(r.t, found, "no record of %s at %v", job, at)
	return rec
}

// statuses returns the status of every slot of job from from to to
// (inclusive) every step, "" where there is no record.
func (r *rig) statuses(job string, from, to time.Time, step time.Duration) map[time.Time]ledger.Status {
	r.t.Helper()
	out := map[time.Time]ledger.Status{}
	for at := from; !at.After(to); at = at.Add(step) {
		rec, found, err := r.ledger.Get(context.Background(), ledger.Slot{Job: job, At: at})
		require.NoError(r.t, err)
		if found {
			out[at] = rec.Status
		} else {
			out[at] = ""
		}
	}
	return out
}

// pgLedger returns a migrated Postgres ledger in a schema of its own, on a
// pool of its own closed (before the leak check) when the test ends.
func pgLedger(t *testing.T) ledger.Ledger {
	t.Helper()
	pool := pgtest.OwnPool(t, func(cfg *pgxpool.Config) { cfg.MaxConns = 4 })
	schema := pgtest.Schema(t, pool, "sched_fake_")
	l, err := pgledger.New(pool, pgledger.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, l.Migrate(t.Context()))
	return l
}
