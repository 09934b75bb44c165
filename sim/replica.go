package sim

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// skewClock is a replica's wall clock: the bubble's, plus an offset the
// driver sets (skew) and moves (steps, both ways). Timers are the
// bubble's: a wall-clock step does not move them, as on a real host.
type skewClock struct{ offset atomic.Int64 }

func (c *skewClock) Now() time.Time                       { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *skewClock) NewTimer(d time.Duration) clock.Timer { return clock.Real().NewTimer(d) }
func (c *skewClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return clock.Real().AfterFunc(d, f)
}
func (c *skewClock) step(d time.Duration) { c.offset.Add(int64(d)) }

// leaseView is one replica's lease backend: the store over its link. It
// remembers the owner of each grant that reached the replica, for the
// checker's beliefs.
type leaseView struct {
	s      *leaseStore
	p      *proc
	owners map[string]string // name -> owner of the latest grant delivered; guarded by the store's lock
	label  string            // the replica's holder label
}

// HolderLabel implements leasedriver.Labeled.
func (v *leaseView) HolderLabel() string { return v.label }

var (
	_ leasedriver.Backend  = (*leaseView)(nil)
	_ leasedriver.Notifier = (*leaseView)(nil)
	_ leasedriver.Labeled  = (*leaseView)(nil)
)

func (v *leaseView) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (g leasedriver.Grant, err error) {
	err = v.p.call(ctx, "lease", func() error {
		var e error
		g, e = v.s.Acquire(ctx, name, owner, ttl)
		return e
	})
	if err == nil && g.Acquired {
		v.s.mu.Lock()
		v.owners[name] = owner
		v.s.mu.Unlock()
	}
	return g, err
}

func (v *leaseView) Renew(ctx context.Context, batch []leasedriver.Held) []error {
	var errs []error
	err := v.p.call(ctx, "lease", func() error { errs = v.s.Renew(ctx, batch); return nil })
	if err != nil {
		errs = make([]error, len(batch))
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}

func (v *leaseView) Release(ctx context.Context, h leasedriver.Held) error {
	return v.p.call(ctx, "lease", func() error { return v.s.Release(ctx, h) })
}

func (v *leaseView) Released(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	return v.s.Released(ctx, name)
}

func (v *leaseView) owner(name string) string {
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	return v.owners[name]
}

// observer turns a replica's lease events into the checker's beliefs.
type observer struct {
	r   int
	v   *leaseView
	chk *checker
}

func (o observer) ObserveAcquire(name string, err error, _ time.Duration) {
	if err == nil {
		o.chk.acquired(o.r, name, o.v.owner(name), time.Now())
	}
}
func (o observer) ObserveRenew(string, error, time.Duration) {}
func (o observer) ObserveLoss(name string, _ error)          { o.chk.lost(o.r, name) }
func (o observer) ObserveEvictions(int64)                    {}

// jobs are the simulated schedule: two jobs, one with two partitions,
// every second and every two seconds (so a trigger at an odd second is a
// slot of its own).
var jobs = []struct {
	name       string
	spec       string
	every      int64
	partitions []string
}{
	{"pay", "* * * * * *", 1, []string{"eu", "us"}},
	{"mail", "*/2 * * * * *", 2, nil},
}

// leaseTTL is every job's lease TTL.
const leaseTTL = 3 * time.Second

// replica is one scheduler process: its lease client and scheduler over
// its own links, its clock and its process state.
type replica struct {
	idx   int
	inc   int // the incarnation: unique per start, the checker's key for its beliefs
	proc  *proc
	clock *skewClock
	sched *scheduler.Scheduler
	lv    *leaseView
	// frozen: paused by pause_holder (the driver's goroutine only), so
	// that two such pauses do not overlap on one replica.
	frozen bool
}

// startReplica builds and starts replica idx (a new incarnation after a
// crash: new process state, new lease client, same clock).
func (w *world) startReplica(idx int, clk *skewClock) (*replica, error) {
	w.mu.Lock()
	w.inc++
	inc := w.inc
	w.mu.Unlock()
	p := newProc()
	lv := &leaseView{s: w.leases, p: p, owners: map[string]string{}, label: fmt.Sprintf("replica-%d", idx)}
	client, err := lease.NewWithBackend(lv, lease.Options{
		Observer: observer{r: inc, v: lv, chk: w.chk},
	})
	if err != nil {
		return nil, err
	}
	sv := &sinkView{s: w.sink, p: p}
	var logger *slog.Logger
	if w.chk.debug != nil {
		logger = slog.New(debugHandler{w.chk.debug, fmt.Sprintf("r%d.%d", idx, inc), clk})
	}
	s, err := scheduler.New(scheduler.Options{
		Logger: logger,
		Leases: client,
		Ledger: &ledgerView{s: w.ledger, p: p},
		Clock:  clk,
		Holder: fmt.Sprintf("replica-%d", idx),
		Jitter: newPCG(w.seed, uint64(idx)+100),
	})
	if err != nil {
		return nil, err
	}
	for _, j := range jobs {
		if err := s.Register(scheduler.Job{
			Name: j.name, Spec: j.spec, Partitions: j.partitions, LeaseTTL: leaseTTL,
			MaxAttempts: 5,
			Run:         w.jobFunc(p, sv),
		}); err != nil {
			return nil, err
		}
	}
	if err := s.Start(context.Background()); err != nil {
		return nil, err
	}
	return &replica{idx: idx, inc: inc, proc: p, clock: clk, sched: s, lv: lv}, nil
}

// jobFunc is every job's work: a while of simulated work (respecting
// ctx), then the effect, written through the sink with the run's fence
// and idempotency key. A paused replica stops before the write and
// writes when resumed, whatever became of its lease meanwhile: the case
// fencing exists for.
func (w *world) jobFunc(p *proc, sv *sinkView) func(context.Context, scheduler.Run) error {
	return func(ctx context.Context, run scheduler.Run) error {
		id := slotID{run.Job, run.Partition, run.At.Unix()}
		h := fnv.New64a()
		_, _ = fmt.Fprint(h, id.job, id.partition, id.at, run.Attempt)
		work := time.Duration(50+h.Sum64()%400) * time.Millisecond
		t := time.NewTimer(work)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		}
		if err := p.wait(); err != nil {
			return err
		}
		if w.chk.debug != nil {
			w.chk.debug(fmt.Sprintf("write %s token=%d ctx=%v", id, run.Token, ctx.Err()))
		}
		resource := "effect:" + ledger.UnitScope(run.Job, run.Partition)
		if w.sink.mut.has(fenceKeyShared) && run.Job == "mail" {
			resource = "effect:" + ledger.UnitScope("pay", "eu") + ":fence" // a name from input
		}
		return sv.write(ctx, resource, run.Token, run.Owner, run.IdempotencyKey, id)
	}
}

// debugHandler passes a replica's log lines to Config.debug (tests only).
type debugHandler struct {
	f    func(string)
	name string
	clk  *skewClock
}

func (h debugHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h debugHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h debugHandler) WithGroup(string) slog.Handler            { return h }
func (h debugHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", time.Now().UTC().Format("15:04:05.000"), h.name, r.Message)
	r.Attrs(func(a slog.Attr) bool {
		v := a.Value.String()
		if a.Value.Kind() == slog.KindTime {
			v = a.Value.Time().UTC().Format("15:04:05.000")
		}
		fmt.Fprintf(&b, " %s=%s", a.Key, v)
		return true
	})
	h.f(b.String())
	return nil
}
