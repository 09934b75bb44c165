package scheduler

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/lease"
)

// everySecond is the spec the tests use: one slot per second keeps them
// short, and StartAt/EndAt windows bound how many slots a job has.
const everySecond = "* * * * * *"

// setup is the per-test bundle: one Redis, the key prefixes every replica of
// the test shares, and a ledger over them for inspection.
type setup struct {
	rdb          redis.UniversalClient
	leasePrefix  string
	ledgerPrefix string
	ledger       *RedisLedger
}

func newSetup(t *testing.T, b redistest.Backend) *setup {
	t.Helper()
	rdb := b.New(t)
	prefix := redistest.Prefix(t, rdb)
	s := &setup{rdb: rdb, leasePrefix: prefix + "lease:", ledgerPrefix: prefix + "ledger:"}
	var err error
	s.ledger, err = NewRedisLedger(rdb, s.ledgerPrefix)
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
func (s *setup) replica(t *testing.T, opts ...func(*Config)) *Scheduler {
	t.Helper()
	leases, err := lease.New(s.rdb, lease.Options{Prefix: s.leasePrefix})
	require.NoError(t, err)
	ledger, err := NewRedisLedger(s.rdb, s.ledgerPrefix)
	require.NoError(t, err)
	cfg := Config{Leases: leases, Ledger: ledger}
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

// watched makes the replica's ledger w, wrapping its RedisLedger.
func watched(w *watchedLedger) func(*Config) {
	return func(c *Config) { w.Ledger = c.Ledger; c.Ledger = w }
}

// logTo sends the replica's events to fn.
func logTo(fn func(msg string, attrs map[string]string)) func(*Config) {
	return func(c *Config) { c.Logger = slog.New(eventHandler(fn)) }
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
		attrs[a.Key] = a.Value.String()
		return true
	})
	h(r.Message, attrs)
	return nil
}

// leaseKeys returns the Redis keys of the job's lease and its token counter.
func (s *setup) leaseKeys(t *testing.T, job string) (leaseKey, fenceKey string) {
	t.Helper()
	c, err := lease.New(s.rdb, lease.Options{Prefix: s.leasePrefix})
	require.NoError(t, err)
	return c.Keys(job)
}

// leaseKeyOf returns the Redis key of the job's lease.
func (s *setup) leaseKeyOf(t *testing.T, job string) string {
	t.Helper()
	k, _ := s.leaseKeys(t, job)
	return k
}

// record returns the ledger's record of the job's slot at.
func (s *setup) record(t *testing.T, job string, at time.Time) Record {
	t.Helper()
	rec, found, err := s.ledger.Get(context.Background(), Slot{Job: job, At: at})
	require.NoError(t, err)
	require.True(t, found, "no ledger record for %s at %v", job, at)
	return rec
}

// status returns the status of the job's slot at, "" when it has no record.
func (s *setup) status(job string, at time.Time) Status {
	rec, found, err := s.ledger.Get(context.Background(), Slot{Job: job, At: at})
	if err != nil || !found {
		return ""
	}
	return rec.Status
}

// window returns n one-second slots starting 1 to 2 s from now: far enough
// ahead that the replicas are started before the first one.
func window(n int) (startAt, endAt time.Time, slots []time.Time) {
	startAt = time.Now().Add(time.Second).Truncate(time.Second).Add(time.Second).UTC()
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

// claimNow runs one claim of job's slot at on sched, as the job's timer
// would, without starting the scheduler's loops.
func claimNow(t *testing.T, sched *Scheduler, job string, at time.Time) {
	t.Helper()
	sched.mu.Lock()
	r := sched.jobs[job]
	sched.mu.Unlock()
	require.NotNil(t, r, "job %q not registered", job)
	fire, ok := r.schedule.Next(at.Add(-time.Second))
	require.True(t, ok)
	require.Equal(t, at, fire.At)
	ctx := context.Background()
	sched.claim(ctx, ctx, r, fire)
}

// eventually polls cond every 10 ms until it holds, failing after limit.
func eventually(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		<-tick.C
	}
}

// waitDone waits for ch to close, failing the test after limit.
func waitDone(t *testing.T, ch <-chan struct{}, limit time.Duration, what string) {
	t.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		t.Fatalf("%s: not within %v", what, limit)
	}
}

// runLog records the runs of job functions, in the order they started.
type runLog struct {
	mu   sync.Mutex
	runs []Run
}

func (l *runLog) add(r Run) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.runs = append(l.runs, r)
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

// count returns how many times the slot at ran.
func (l *runLog) count(at time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.runs {
		if r.At.Equal(at) {
			n++
		}
	}
	return n
}

// finishCall is one Ledger.Finish seen by a watchedLedger.
type finishCall struct {
	slot   Slot
	token  fence.Token
	status Status
	err    error
}

// watchedLedger records the Finish calls of the Ledger it wraps and, when
// onOutstanding is set, calls it (with the call's number, from 1) before each
// Outstanding.
type watchedLedger struct {
	Ledger
	onOutstanding func(call int)

	mu          sync.Mutex
	outstanding int
	finishes    []finishCall
}

func (w *watchedLedger) Outstanding(ctx context.Context, job, partition string, since time.Time) ([]time.Time, time.Time, error) {
	w.mu.Lock()
	w.outstanding++
	n := w.outstanding
	w.mu.Unlock()
	if w.onOutstanding != nil {
		w.onOutstanding(n)
	}
	return w.Ledger.Outstanding(ctx, job, partition, since)
}

func (w *watchedLedger) Finish(ctx context.Context, slot Slot, token fence.Token, owner string, attempt int, status Status, errText string, final bool) error {
	err := w.Ledger.Finish(ctx, slot, token, owner, attempt, status, errText, final)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.finishes = append(w.finishes, finishCall{slot: slot, token: token, status: status, err: err})
	return err
}

func (w *watchedLedger) calls() []finishCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]finishCall(nil), w.finishes...)
}
