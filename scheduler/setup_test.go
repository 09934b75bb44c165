package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/redislease"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// everySecond is the spec the tests use: one slot per second keeps them
// short, and StartAt/EndAt windows bound how many slots a job has.
const everySecond = "* * * * * *"

// yearly is a spec with no slot during a test: the runs of a job on it come
// only from operator requests (Trigger, Backfill, Retry).
const yearly = "0 0 0 1 1 *"

// setup is the per-test bundle: one Redis, the key prefixes every replica of
// the test shares, and a ledger over them for inspection.
type setup struct {
	backend      string
	rdb          redis.UniversalClient
	prefix       string
	leasePrefix  string
	ledgerPrefix string
	ledger       *redisledger.Ledger
}

func newSetup(t *testing.T, b redistest.Backend) *setup {
	t.Helper()
	rdb := b.New(t)
	prefix := redistest.Prefix(t, rdb)
	s := &setup{backend: b.Name, rdb: rdb, prefix: prefix, leasePrefix: prefix + "lease:", ledgerPrefix: prefix + "ledger:"}
	var err error
	s.ledger, err = redisledger.New(rdb, redisledger.Options{Prefix: s.ledgerPrefix})
	require.NoError(t, err)
	return s
}

// eachBackend runs fn against real Redis and miniredis, in parallel.
func eachBackend(t *testing.T, fn func(t *testing.T, s *setup)) {
	t.Helper()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, newSetup(t, b))
		})
	}
}

// replica returns a Scheduler as a separate replica would build it: its own
// lease.Client and RedisLedger over the shared Redis and prefixes, changed
// by opts. It is stopped when the test ends.
func (s *setup) replica(t *testing.T, opts ...func(*Options)) *Scheduler {
	t.Helper()
	leases, err := lease.New(s.rdb, lease.Options{Prefix: s.leasePrefix})
	require.NoError(t, err)
	ledger, err := redisledger.New(s.rdb, redisledger.Options{Prefix: s.ledgerPrefix})
	require.NoError(t, err)
	cfg := Options{Leases: leases, Ledger: ledger}
	for _, o := range opts {
		o(&cfg)
	}
	sched, err := New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = sched.Stop(ctx)
	})
	return sched
}

// started registers job on a new replica and starts it.
func (s *setup) started(t *testing.T, job Job, opts ...func(*Options)) *Scheduler {
	t.Helper()
	sched := s.replica(t, opts...)
	require.NoError(t, sched.Register(job))
	require.NoError(t, sched.Start(context.Background()))
	return sched
}

// loseData makes Redis forget everything the test wrote, as a restart
// without persistence does: FLUSHALL on the test's own miniredis, the
// test's keys on the shared real server.
func (s *setup) loseData(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if s.backend == "miniredis" {
		require.NoError(t, s.rdb.FlushAll(ctx).Err())
		return
	}
	var keys []string
	iter := s.rdb.Scan(ctx, 0, s.prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	require.NoError(t, iter.Err())
	require.NotEmpty(t, keys)
	require.NoError(t, s.rdb.Del(ctx, keys...).Err())
}

// watched makes the replica's ledger w, wrapping its RedisLedger.
func watched(w *watchedLedger) func(*Options) {
	return func(c *Options) { w.Ledger = c.Ledger; c.Ledger = w }
}

// logTo sends the replica's events to fn.
func logTo(fn func(msg string, attrs map[string]string)) func(*Options) {
	return func(c *Options) { c.Logger = slog.New(eventHandler(fn)) }
}

// eventHandler is a slog.Handler that hands every event, at every level,
// to a function: tests wait on events instead of sleeping.
type eventHandler func(msg string, attrs map[string]string)

func (h eventHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h eventHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h eventHandler) WithGroup(string) slog.Handler            { return h }
func (h eventHandler) Handle(_ context.Context, r slog.Record) error {
	attrs := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		if a.Value.Kind() == slog.KindTime {
			attrs[a.Key] = a.Value.Time().UTC().Format(time.RFC3339)
		} else {
			attrs[a.Key] = a.Value.String()
		}
		return true
	})
	h(r.Message, attrs)
	return nil
}

// leaseKeys returns the Redis keys of the lease of (job, partition) and its
// token counter.
func (s *setup) leaseKeys(t *testing.T, job, partition string) (leaseKey, fenceKey string) {
	t.Helper()
	b, err := redislease.NewBackend(s.rdb, redislease.Options{Prefix: s.leasePrefix})
	require.NoError(t, err)
	k, err := b.Keys(ledger.UnitScope(job, partition))
	require.NoError(t, err)
	return k.Lease, k.Fence
}

// dropLease deletes the lease key of (job, partition): the holder has lost
// it (expired, evicted) and another replica may take it.
func (s *setup) dropLease(t *testing.T, job, partition string) {
	t.Helper()
	k, _ := s.leaseKeys(t, job, partition)
	require.NoError(t, s.rdb.Del(context.Background(), k).Err())
}

// record returns the ledger's record of the slot of (job, partition) at.
func (s *setup) record(t *testing.T, job, partition string, at time.Time) ledger.Record {
	t.Helper()
	rec, found, err := s.ledger.Get(context.Background(), ledger.Slot{Job: job, At: at, Partition: partition})
	require.NoError(t, err)
	require.True(t, found, "no ledger record for %s/%s at %v", job, partition, at)
	return rec
}

// status returns the status of the slot of (job, partition) at, "" when it
// has no record.
func (s *setup) status(job, partition string, at time.Time) ledger.Status {
	rec, found, err := s.ledger.Get(context.Background(), ledger.Slot{Job: job, At: at, Partition: partition})
	if err != nil || !found {
		return ""
	}
	return rec.Status
}

// open returns the slots of (job, partition) the ledger still holds open.
func (s *setup) open(t *testing.T, job, partition string) []ledger.OpenSlot {
	t.Helper()
	st, err := s.ledger.State(context.Background(), job, partition, time.Now().Add(-time.Hour), time.Now())
	require.NoError(t, err)
	return st.Open
}

// slotWindow returns n one-second slots, the first at least 300 ms from now:
// far enough ahead that the replicas are started before it.
func slotWindow(n int) (startAt, endAt time.Time, slots []time.Time) {
	now := time.Now()
	startAt = now.Truncate(time.Second).Add(time.Second)
	if startAt.Sub(now) < 300*time.Millisecond {
		startAt = startAt.Add(time.Second)
	}
	startAt = startAt.UTC()
	for i := range n {
		slots = append(slots, startAt.Add(time.Duration(i)*time.Second))
	}
	return startAt, startAt.Add(time.Duration(n) * time.Second), slots
}

// past returns n one-second slots that all lie in the past, the last one
// `ago` before the current second.
func past(n int, ago time.Duration) []time.Time {
	last := time.Now().Truncate(time.Second).Add(-ago).UTC()
	slots := make([]time.Time, n)
	for i := range n {
		slots[i] = last.Add(-time.Duration(n-1-i) * time.Second)
	}
	return slots
}

// unitOf returns sched's unit of (job, partition).
func unitOf(t *testing.T, sched *Scheduler, job, partition string) *unit {
	t.Helper()
	u, err := sched.unit(job, partition)
	require.NoError(t, err)
	return u
}

// claimNow runs one claim of the slot of (job, partition) at on sched, as
// the unit's timer would, without starting the scheduler's loops.
func claimNow(t *testing.T, sched *Scheduler, job, partition string, at time.Time) {
	t.Helper()
	u := unitOf(t, sched, job, partition)
	fire, ok := u.job.window.sched.Next(at.Add(-time.Second))
	require.True(t, ok)
	require.Equal(t, at, fire.At)
	outsideLife(sched)
	sched.claimNow(u, claimReq{fire: fire})
}

// claimWake runs one claim of (job, partition) as a wake-up would (a retry
// falls due, an operator asked for a run): no slot of its own.
func claimWake(t *testing.T, sched *Scheduler, job, partition string) {
	t.Helper()
	u := unitOf(t, sched, job, partition)
	outsideLife(sched)
	sched.claimNow(u, claimReq{})
}

// onClock makes a replica read clk (a fake clock the test moves).
func onClock(clk *clock.Fake) func(*Options) {
	return func(c *Options) { c.Clock = clk }
}

// tickAll moves clk forward by d in steps of at most step, waiting after
// each until every scheduler in scheds is quiet with held of its job
// functions blocked by the test (see quiet), for at most 30 s (a busy
// machine under -race, real Redis); past that it prints each scheduler's
// QuietState and a goroutine dump.
func tickAll(t *testing.T, clk *clock.Fake, d, step time.Duration, held *atomic.Int64, scheds ...*Scheduler) {
	t.Helper()
	for d > 0 {
		st := min(d, step)
		clk.Advance(st)
		d -= st
		settled := func() bool {
			var busy int64
			for _, s := range scheds {
				idle, b := s.quiet()
				if !idle {
					return false
				}
				busy += b
			}
			return busy == held.Load()
		}
		if testwait.Poll(30*time.Second, testwait.Interval, func() error {
			if settled() {
				return nil
			}
			return errors.New("not quiet")
		}) != nil {
			var states []string
			for i, s := range scheds {
				idle, b := s.quiet()
				states = append(states, fmt.Sprintf("replica %d idle=%v busy=%d %s", i, idle, b, s.QuietState()))
			}
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
			t.Fatalf("the replicas settle: not within 30s at %v: %v, held %d", clk.Now(), states, held.Load())
		}
	}
}

// outsideLife lets a test claim on a Scheduler that was stopped, as one
// outside its dispatcher: its contexts become background ones again.
func outsideLife(sched *Scheduler) {
	sched.mu.Lock()
	defer sched.mu.Unlock()
	if sched.life.claim.Err() != nil {
		sched.life = lifetime{claim: context.Background(), run: context.Background()}
	}
}

// runLog records the runs of job functions, in the order they started, with
// the time each started and ended.
type runLog struct {
	mu    sync.Mutex
	runs  []Run
	spans []span
}

// span is one run of a job function, from start to end.
type span struct {
	run        Run
	start, end time.Time
}

func (l *runLog) add(r Run) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, r)
}

// begin records a run that starts now; call the returned function when it
// ends.
func (l *runLog) begin(r Run) (end func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, r)
	l.spans = append(l.spans, span{run: r, start: time.Now()})
	i := len(l.spans) - 1
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.spans[i].end = time.Now()
	}
}

// all returns a copy of the runs.
func (l *runLog) all() []Run {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Run(nil), l.runs...)
}

// allSpans returns a copy of the spans recorded with begin.
func (l *runLog) allSpans() []span {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]span(nil), l.spans...)
}

// slots returns the slot instants run, in order.
func (l *runLog) slots() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]time.Time, len(l.runs))
	for i, r := range l.runs {
		out[i] = r.At
	}
	return out
}

// count returns how many times the slot of partition at ran.
func (l *runLog) count(partition string, at time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.runs {
		if r.At.Equal(at) && r.Partition == partition {
			n++
		}
	}
	return n
}

// requireNoOverlap fails when two runs of the same (job, partition) were in
// flight at the same time.
func (l *runLog) requireNoOverlap(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, a := range l.spans {
		require.False(t, a.end.IsZero(), "run %d of %v has not ended", i, a.run.Slot)
		for _, b := range l.spans[i+1:] {
			if a.run.Job != b.run.Job || a.run.Partition != b.run.Partition {
				continue
			}
			require.True(t, !b.start.Before(a.end) || !a.start.Before(b.end),
				"runs overlap: %v attempt %d [%v, %v] and %v attempt %d [%v, %v]",
				a.run.At, a.run.Attempt, a.start, a.end, b.run.At, b.run.Attempt, b.start, b.end)
		}
	}
}

// finishCall is one Ledger.Finish seen by a watchedLedger.
type finishCall struct {
	slot    ledger.Slot
	fence   ledger.Fence
	outcome ledger.Outcome
	err     error
}

// watchedLedger records the Finish calls of the Ledger it wraps and, when
// onState is set, calls it (with the call's number, from 1) before each
// State.
type watchedLedger struct {
	ledger.Ledger
	onState func(call int)

	mu       sync.Mutex
	states   int
	finishes []finishCall
}

func (w *watchedLedger) State(ctx context.Context, job, partition string, since, now time.Time) (ledger.State, error) {
	w.mu.Lock()
	w.states++
	n := w.states
	w.mu.Unlock()
	if w.onState != nil {
		w.onState(n)
	}
	return w.Ledger.State(ctx, job, partition, since, now)
}

func (w *watchedLedger) Finish(ctx context.Context, slot ledger.Slot, f ledger.Fence, attempt int, o ledger.Outcome, now time.Time) error {
	err := w.Ledger.Finish(ctx, slot, f, attempt, o, now)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.finishes = append(w.finishes, finishCall{slot: slot, fence: f, outcome: o, err: err})
	return err
}

func (w *watchedLedger) calls() []finishCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]finishCall(nil), w.finishes...)
}
