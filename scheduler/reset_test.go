package scheduler

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/ledgertest"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// errStoreDown is what lossyLedger answers while its store is down.
var errStoreDown = errors.New("lossy: store down")

// lossyLedger is a ledgertest.Memory that can go down (every call fails)
// and lose its data (a new, empty Memory), as a Redis without persistence
// that is shut down and started again.
type lossyLedger struct {
	mu   sync.Mutex
	mem  *ledgertest.Memory
	down bool
}

func newLossyLedger() *lossyLedger { return &lossyLedger{mem: ledgertest.NewMemory()} }

func (l *lossyLedger) get() (*ledgertest.Memory, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down {
		return nil, errStoreDown
	}
	return l.mem, nil
}

// shutDown makes every call fail; comeBack makes them work again, on an
// empty ledger.
func (l *lossyLedger) shutDown() { l.mu.Lock(); l.down = true; l.mu.Unlock() }
func (l *lossyLedger) comeBackEmpty() {
	l.mu.Lock()
	l.down, l.mem = false, ledgertest.NewMemory()
	l.mu.Unlock()
}

func (l *lossyLedger) State(ctx context.Context, job, partition string, since, now time.Time) (ledger.State, error) {
	m, err := l.get()
	if err != nil {
		return ledger.State{}, err
	}
	return m.State(ctx, job, partition, since, now)
}

func (l *lossyLedger) Begin(ctx context.Context, slot ledger.Slot, f ledger.Fence, maxAttempts int, now time.Time) (int, int, error) {
	m, err := l.get()
	if err != nil {
		return 0, 0, err
	}
	return m.Begin(ctx, slot, f, maxAttempts, now)
}

func (l *lossyLedger) Heartbeat(ctx context.Context, slot ledger.Slot, f ledger.Fence, attempt int, now time.Time) error {
	m, err := l.get()
	if err != nil {
		return err
	}
	return m.Heartbeat(ctx, slot, f, attempt, now)
}

func (l *lossyLedger) Finish(ctx context.Context, slot ledger.Slot, f ledger.Fence, attempt int, o ledger.Outcome, now time.Time) error {
	m, err := l.get()
	if err != nil {
		return err
	}
	return m.Finish(ctx, slot, f, attempt, o, now)
}

func (l *lossyLedger) Skip(ctx context.Context, slot ledger.Slot, f ledger.Fence, status ledger.Status, reason string, now time.Time) error {
	m, err := l.get()
	if err != nil {
		return err
	}
	return m.Skip(ctx, slot, f, status, reason, now)
}

func (l *lossyLedger) Request(ctx context.Context, slot ledger.Slot, reason string, now time.Time) error {
	m, err := l.get()
	if err != nil {
		return err
	}
	return m.Request(ctx, slot, reason, now)
}

func (l *lossyLedger) SetPaused(ctx context.Context, job string, paused bool) error {
	m, err := l.get()
	if err != nil {
		return err
	}
	return m.SetPaused(ctx, job, paused)
}

func (l *lossyLedger) Get(ctx context.Context, slot ledger.Slot) (ledger.Record, bool, error) {
	m, err := l.get()
	if err != nil {
		return ledger.Record{}, false, err
	}
	return m.Get(ctx, slot)
}

func (l *lossyLedger) List(ctx context.Context, job, partition string, from, to time.Time, limit int) ([]ledger.Record, error) {
	m, err := l.get()
	if err != nil {
		return nil, err
	}
	return m.List(ctx, job, partition, from, to, limit)
}

// resetCounter is an Observer that counts LedgerReset.
type resetCounter struct {
	nopObserver
	resets atomic.Int64
}

func (c *resetCounter) LedgerReset(string) { c.resets.Add(1) }

// syncBuffer is a log sink safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}
func (b *syncBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

// resetOutcome is what a run of the data-loss scenario left.
type resetOutcome struct {
	lost, duplicated int // slots with neither an effect nor a record; slots run twice
	resets           int64
	events           int // ledger_reset log lines
	log              string
}

// runLedgerLoss runs three replicas of a per-second job with three
// partitions on fake time over a lossyLedger (leases on miniredis, which
// stays up): 5 s of normal work, 6 s with the ledger down, then the
// ledger back empty for 8 s. It counts, over every slot of the window,
// those with neither a run nor a ledger record, and those run twice.
func runLedgerLoss(t *testing.T, checkOff bool) resetOutcome {
	t.Helper()
	start := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	rdb := redistest.Mini(t)
	prefix := redistest.Prefix(t, rdb)
	leases, err := lease.New(rdb, lease.Options{Prefix: prefix + "lease:"})
	require.NoError(t, err)
	led := newLossyLedger()
	obs := &resetCounter{}
	logs := &syncBuffer{}
	var runs runLog
	parts := []string{"a", "b", "c"}
	first, end := start.Add(time.Second), start.Add(20*time.Second)
	job := Job{Name: "wiped", Spec: everySecond, Partitions: parts, StartAt: first, EndAt: end,
		Run: func(ctx context.Context, run Run) error { runs.add(run); return nil }}
	var scheds []*Scheduler
	for range 3 {
		s, err := New(Options{Leases: leases, Ledger: led, Clock: clk, Observer: obs,
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
		require.NoError(t, err)
		s.resetCheckOff = checkOff
		require.NoError(t, s.Register(job))
		require.NoError(t, s.Start(context.Background()))
		scheds = append(scheds, s)
	}
	t.Cleanup(func() {
		for _, s := range scheds {
			_ = s.Stop(context.Background())
		}
	})
	// Every dispatcher parks on the fake clock before it first moves: a
	// timer armed after a move would fire late.
	testwait.Until(t, 30*time.Second, "the replicas are parked", func() bool {
		for _, s := range scheds {
			if idle, busy := s.quiet(); !idle || busy != 0 {
				return false
			}
		}
		return true
	})
	var held atomic.Int64
	tickAll(t, clk, 5*time.Second, 250*time.Millisecond, &held, scheds...)
	led.shutDown()
	tickAll(t, clk, 6*time.Second, 250*time.Millisecond, &held, scheds...)
	led.comeBackEmpty()
	tickAll(t, clk, 9*time.Second, 250*time.Millisecond, &held, scheds...)
	for _, s := range scheds {
		require.NoError(t, s.Stop(context.Background()))
	}

	out := resetOutcome{resets: obs.resets.Load(), log: logs.String()}
	out.events = strings.Count(out.log, "msg=ledger_reset")
	for _, p := range parts {
		for at := first; at.Before(end); at = at.Add(time.Second) {
			n := runs.count(p, at)
			_, found, err := led.Get(context.Background(), ledger.Slot{Job: "wiped", At: at, Partition: p})
			require.NoError(t, err)
			if n == 0 && !found {
				out.lost++
				t.Logf("slot %s %v: neither an effect nor a record", p, at.Format(time.TimeOnly))
			}
			if n > 1 {
				out.duplicated++
				t.Logf("slot %s %v: run %d times", p, at.Format(time.TimeOnly), n)
			}
		}
	}
	return out
}

// A ledger that comes back empty after an outage: every slot that came
// due while it was down is run (Job.Missed: catch-up) or recorded, no
// slot is run twice, and each replica that finds the reset logs one
// ledger_reset event per (job, partition) and counts it. Control: with the
// finding turned off, slots vanish (the behaviour before).
func TestLedgerResetLosesNoSlot(t *testing.T) {
	t.Parallel()
	t.Run("Found", func(t *testing.T) {
		t.Parallel()
		out := runLedgerLoss(t, false)
		require.Zero(t, out.lost, "slots with neither an effect nor a record")
		require.Zero(t, out.duplicated, "slots run twice")
		require.Positive(t, out.resets, "LedgerReset counted")
		require.Equal(t, int(out.resets), out.events, "one ledger_reset event per count")
		require.LessOrEqual(t, out.events, 3*3, "at most one per replica and (job, partition)")
		t.Logf("%d ledger_reset events; the first: %s", out.events, firstLine(out.log, "msg=ledger_reset"))
	})
	t.Run("ControlCheckOff", func(t *testing.T) {
		t.Parallel()
		out := runLedgerLoss(t, true)
		require.Positive(t, out.lost, "without the finding, slots of the outage vanish")
		require.Zero(t, out.resets)
		require.Zero(t, out.events)
	})
}

// firstLine returns the first line of log that holds s.
func firstLine(log, s string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// On a real redis-server of its own, killed and started again empty
// (no persistence): three replicas of a per-second job with three
// partitions, the leases and the Redis ledger on that server. Every slot
// of the window that came due has an effect or a record afterwards, none
// is run twice, and the reset is logged and counted.
func TestRedisLostItsDataMidScheduleLosesNoSlot(t *testing.T) {
	t.Parallel()
	srv := redisproc.Start(t)
	rdb := srv.Client(t, func(o *redis.Options) {
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.MaxRetries = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond, -1
	})
	obs := &resetCounter{}
	logs := &syncBuffer{}
	var runs runLog
	parts := []string{"a", "b", "c"}
	first := time.Now().Truncate(time.Second).Add(2 * time.Second)
	end := first.Add(16 * time.Second)
	job := Job{Name: "wiped", Spec: everySecond, Partitions: parts, StartAt: first, EndAt: end,
		Run: func(ctx context.Context, run Run) error { runs.add(run); return nil }}
	var scheds []*Scheduler
	for range 3 {
		leases, err := lease.New(rdb, lease.Options{Prefix: "lease:"})
		require.NoError(t, err)
		led, err := redisledger.New(rdb, redisledger.Options{Prefix: "ledger:"})
		require.NoError(t, err)
		s, err := New(Options{Leases: leases, Ledger: led, Observer: obs,
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
		require.NoError(t, err)
		require.NoError(t, s.Register(job))
		require.NoError(t, s.Start(context.Background()))
		scheds = append(scheds, s)
	}
	t.Cleanup(func() {
		for _, s := range scheds {
			_ = s.Stop(context.Background())
		}
	})
	passed := func(at time.Time) func() bool { return func() bool { return time.Now().After(at) } }
	testwait.Until(t, time.Minute, "5 slots ran", passed(first.Add(4500*time.Millisecond)))
	srv.Kill(t)
	downAt := time.Now()
	testwait.Until(t, time.Minute, "the outage lasted 5 s", passed(downAt.Add(5*time.Second)))
	srv.Restart(t)
	testwait.Until(t, time.Minute, "the window ended", passed(end.Add(3*time.Second)))
	for _, s := range scheds {
		require.NoError(t, s.Stop(context.Background()))
	}
	led, err := redisledger.New(rdb, redisledger.Options{Prefix: "ledger:"})
	require.NoError(t, err)
	lost, twice := 0, 0
	for _, p := range parts {
		for at := first; at.Before(end); at = at.Add(time.Second) {
			n := runs.count(p, at)
			_, found, err := led.Get(context.Background(), ledger.Slot{Job: "wiped", At: at, Partition: p})
			require.NoError(t, err)
			if n == 0 && !found {
				lost++
				t.Logf("slot %s %v: neither an effect nor a record", p, at.Format(time.TimeOnly))
			}
			if n > 1 {
				twice++
			}
		}
	}
	require.Zero(t, lost, "slots with neither an effect nor a record")
	require.Zero(t, twice, "slots run twice")
	require.Positive(t, obs.resets.Load())
	require.Equal(t, int(obs.resets.Load()), strings.Count(logs.String(), "msg=ledger_reset"))
}

// On the real Redis: the lease of a unit is held by another owner that
// runs nothing (a replica cut off from Redis after it took the lease, seed
// 33 of the simulator) for three fires, and the Redis ledger loses its
// data meanwhile. The scheduler, which found the lease held at those
// fires, finds the reset at its next claim (its fast request carries the
// last slot it saw recorded, ledger.BeginRequest.Seen, and the emptied
// ledger answers not clear) and records each of them skipped with
// reasonRecordLost: every slot of the window has a run or a record.
// Before, the fast path began the next slot on the empty ledger, no reset
// was found, and the slots found held had neither.
func TestRedisResetAfterAHolderThatRanNothing(t *testing.T) {
	t.Parallel()
	rdb := redistest.Real(t)
	prefix := redistest.Prefix(t, rdb)
	leases, err := lease.New(rdb, lease.Options{Prefix: prefix + "lease:"})
	require.NoError(t, err)
	led, err := redisledger.New(rdb, redisledger.Options{Prefix: prefix + "ledger:"})
	require.NoError(t, err)
	obs := &resetCounter{}
	logs := &syncBuffer{}
	var runs runLog
	first := time.Now().Truncate(time.Second).Add(2 * time.Second)
	end := first.Add(12 * time.Second)
	job := Job{Name: "silent", Spec: everySecond, StartAt: first, EndAt: end,
		Run: func(ctx context.Context, run Run) error { runs.add(run); return nil }}
	s, err := New(Options{Leases: leases, Ledger: led, Observer: obs,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	require.NoError(t, err)
	require.NoError(t, s.Register(job))
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	passed := func(at time.Time) func() bool { return func() bool { return time.Now().After(at) } }
	testwait.Until(t, time.Minute, "three slots ran", passed(first.Add(2500*time.Millisecond)))

	other, err := lease.New(rdb, lease.Options{Prefix: prefix + "lease:"})
	require.NoError(t, err)
	var l *lease.Lease
	testwait.Until(t, 10*time.Second, "another owner holds the unit's lease", func() bool {
		l, err = other.TryAcquire(t.Context(), ledger.UnitScope("silent", ""), 30*time.Second)
		return err == nil
	})
	heldFrom := time.Now()
	// The ledger loses its data while that owner holds the lease.
	keys, err := rdb.Keys(t.Context(), prefix+"ledger:*").Result()
	require.NoError(t, err)
	require.NotEmpty(t, keys)
	require.NoError(t, rdb.Del(t.Context(), keys...).Err())
	testwait.Until(t, time.Minute, "three fires found the lease held", passed(heldFrom.Add(3200*time.Millisecond)))
	require.NoError(t, l.Release(t.Context()))
	heldTo := time.Now()
	testwait.Until(t, time.Minute, "the window ended", passed(end.Add(2*time.Second)))
	require.NoError(t, s.Stop(context.Background()))

	lost, unknown := 0, 0
	for at := first; at.Before(end); at = at.Add(time.Second) {
		rec, found, err := led.Get(context.Background(), ledger.Slot{Job: "silent", At: at})
		require.NoError(t, err)
		n := runs.count("", at)
		if n == 0 && !found {
			lost++
			t.Logf("slot %v: neither an effect nor a record", at.Format(time.TimeOnly))
		}
		require.LessOrEqual(t, n, 1, "slot %v run twice", at.Format(time.TimeOnly))
		if at.After(heldFrom) && at.Before(heldTo) && n == 0 {
			require.True(t, found, "slot %v found held has a record", at.Format(time.TimeOnly))
			require.Equal(t, reasonRecordLost, rec.Reason, "slot %v", at.Format(time.TimeOnly))
			require.Equal(t, ledger.StatusSkipped, rec.Status)
			unknown++
		}
	}
	require.Zero(t, lost, "slots with neither an effect nor a record")
	require.GreaterOrEqual(t, unknown, 2, "the fires found held are recorded, outcome unknown")
	require.Positive(t, obs.resets.Load(), "the reset is found")
	t.Logf("%d slots recorded %q; %s", unknown, reasonRecordLost, firstLine(logs.String(), "msg=ledger_reset"))
}
