package chaos

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// lossCounts are a data-loss trial's figures.
type lossCounts struct {
	slots      int // due slots of the window, over every partition
	lost       int // neither an effect nor a record
	reruns     int // an effect more than once
	unrecorded int // an effect, its record gone with the data
	late       int // run more than a second after their time (caught up)
	resets     int // ledger_reset found (Observer.LedgerReset)
}

func (c *lossCounts) add(o lossCounts) {
	c.slots += o.slots
	c.lost += o.lost
	c.reruns += o.reruns
	c.unrecorded += o.unrecorded
	c.late += o.late
	c.resets += o.resets
}

// resetCount counts the ledger resets the replicas found.
type resetCount struct {
	nopObserver
	n atomic.Int64
}

// LedgerReset overrides nopObserver's.
func (r *resetCount) LedgerReset(string) { r.n.Add(1) }

// nopObserver is a scheduler.Observer that drops every measurement.
type nopObserver struct{}

func (nopObserver) RunStarted(string, time.Duration)                             {}
func (nopObserver) RunCompleted(string, ledger.Status, time.Duration, time.Time) {}
func (nopObserver) ClaimConflict(string)                                         {}
func (nopObserver) StaleRejected(string)                                         {}
func (nopObserver) SlotSkipped(string, ledger.Status)                            {}
func (nopObserver) RunFailed(string, ledger.ErrorClass, bool)                    {}
func (nopObserver) LedgerError(string, string)                                   {}
func (nopObserver) LedgerReset(string)                                           {}

// lossTrial runs three scheduler replicas (in this process) of a
// per-second job with three partitions over one test-owned Redis, the
// leases and the Redis ledger on it; 3.5 s into the window Redis is
// SIGKILLed, and 2-4 s later started again empty (no persistence). The
// job's effect is a count per slot. Once the window ended it counts the
// slots with neither an effect nor a record. amnesiac (the control)
// replaces the replicas during the outage by new ones, which have no
// memory of the ledger: nothing can find the loss, and the slots of the
// outage vanish.
func lossTrial(t *testing.T, srv *redisproc.Server, rdb *redis.Client, trial int, amnesiac bool) lossCounts {
	t.Helper()
	prefix := fmt.Sprintf("loss%d:", trial)
	parts := []string{"a", "b", "c"}
	// UTC and no monotonic reading: slots are map keys, compared with
	// those of scheduler.Run.
	first := time.Now().Truncate(time.Second).Add(2 * time.Second).UTC().Round(0)
	end := first.Add(12 * time.Second)
	var mu sync.Mutex
	effects := map[ledger.Slot]int{}
	late := map[ledger.Slot]bool{}
	job := scheduler.Job{Name: "wiped", Spec: "* * * * * *", Partitions: parts, StartAt: first, EndAt: end,
		Run: func(ctx context.Context, run scheduler.Run) error {
			mu.Lock()
			defer mu.Unlock()
			effects[run.Slot]++
			if time.Since(run.At) > time.Second+500*time.Millisecond {
				late[run.Slot] = true
			}
			return nil
		}}
	obs := &resetCount{}
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	start := func() []*scheduler.Scheduler {
		var out []*scheduler.Scheduler
		for range 3 {
			leases, err := lease.New(rdb, lease.Options{Prefix: prefix + "lease:", Logger: logger})
			require.NoError(t, err)
			led, err := redisledger.New(rdb, redisledger.Options{Prefix: prefix + "ledger:"})
			require.NoError(t, err)
			s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: led, Observer: obs, Logger: logger.With("replica", len(out))})
			require.NoError(t, err)
			require.NoError(t, s.Register(job))
			require.NoError(t, s.Start(context.Background()))
			out = append(out, s)
		}
		return out
	}
	stop := func(scheds []*scheduler.Scheduler) {
		for _, s := range scheds {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = s.Stop(ctx)
			cancel()
		}
	}
	scheds := start()
	passed := func(at time.Time) func() bool { return func() bool { return time.Now().After(at) } }
	testwait.Until(t, time.Minute, "3 slots ran", passed(first.Add(3500*time.Millisecond)))
	srv.Kill(t)
	downFor := time.Duration(2000+rand.N(2000)) * time.Millisecond
	if amnesiac {
		stop(scheds) // their memory goes with them
	}
	testwait.Until(t, time.Minute, "the outage lasted", passed(first.Add(3500*time.Millisecond+downFor)))
	srv.Restart(t)
	if amnesiac {
		scheds = start()
	}
	testwait.Until(t, time.Minute, "the window ended", passed(end.Add(3*time.Second)))
	stop(scheds)

	led, err := redisledger.New(rdb, redisledger.Options{Prefix: prefix + "ledger:"})
	require.NoError(t, err)
	c := lossCounts{resets: int(obs.n.Load())}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range parts {
		for at := first; at.Before(end); at = at.Add(time.Second) {
			slot := ledger.Slot{Job: "wiped", At: at, Partition: p}
			_, found, err := led.Get(context.Background(), slot)
			require.NoError(t, err)
			n := effects[slot]
			c.slots++
			switch {
			case n == 0 && !found:
				c.lost++
				if !amnesiac {
					t.Logf("trial %d: slot %s %v: neither an effect nor a record", trial, p, at.Format(time.TimeOnly))
				}
			case n > 0 && !found:
				c.unrecorded++
			}
			if n > 1 {
				c.reruns++
				t.Logf("trial %d: slot %s %v: %d effects", trial, p, at.Format(time.TimeOnly), n)
			}
			if late[slot] {
				c.late++
			}
		}
	}
	if c.lost > 0 && !amnesiac && os.Getenv("CHAOS_DUMP") != "" {
		t.Logf("trial %d logs:\n%s", trial, logs.String())
	}
	return c
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRedisDataLossUnderARunningScheduler (redis-data-loss): three
// scheduler replicas keep a per-second job of three partitions while
// their Redis (leases and ledger) is killed and comes back empty 2-4 s
// later. Violations: slots with neither an effect nor a ledger record
// (docs/guarantees.md, "A ledger that lost its data"). Control: the
// replicas are replaced during the outage (no replica remembers the
// ledger), and the checker finds the slots of the outage gone.
func TestRedisDataLossUnderARunningScheduler(t *testing.T) {
	t.Parallel()
	const name = "redis-data-loss"
	n := trials(20)
	r := newReport(name, n, controls(n))
	srv := redisproc.Start(t)
	rdb := srv.Client(t, fastClient)
	bar := newProgress(name, n+r.controls)

	var total lossCounts
	for i := range n {
		c := lossTrial(t, srv, rdb, i, false)
		total.add(c)
		bar.step()
	}
	r.violations = total.lost
	r.add("slots", total.slots)
	r.add("lost", total.lost)
	r.add("reruns", total.reruns)
	r.add("unrecorded", total.unrecorded)
	r.add("caught_up", total.late)
	r.add("resets_found", total.resets)
	require.Positive(t, total.resets, "the replicas found the resets")

	controlLost := 0
	for i := range r.controls {
		c := lossTrial(t, srv, rdb, n+i, true)
		if c.lost > 0 {
			r.fired++
		}
		controlLost += c.lost
		bar.step()
	}
	r.add("control_lost", controlLost)
	r.finish(t)
}
