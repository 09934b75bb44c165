package scheduler

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler/cron"
)

// ErrInvalidConfig matches every Config that New rejects.
var ErrInvalidConfig = errors.New("scheduler: invalid config")

// DefaultMaxConcurrentClaims bounds the claims (and runs) one Scheduler
// works on at once (64).
const DefaultMaxConcurrentClaims = 64

// Config configures a Scheduler.
type Config struct {
	// Leases acquires the job leases. Required.
	Leases *lease.Client
	// Ledger records runs. Required; NewRedisLedger gives the default
	// store, scheduler/pgledger a Postgres one.
	Ledger Ledger
	// Logger receives job_claimed, job_claim_skipped, job_run_finished,
	// slot_skipped and stale_token_rejected events. Default: discard.
	Logger *slog.Logger
	// Observer receives measurements (see scheduler/schedprom).
	Observer Observer
	// MaxConcurrentClaims bounds how many (job, partition) claims run at
	// once on this replica. Default DefaultMaxConcurrentClaims.
	MaxConcurrentClaims int
}

// Scheduler turns cron ticks into slots and runs each slot once, under the
// lease of its (job, partition), recording every attempt in the ledger.
// Create it with New, Register jobs, then Start; Stop drains it.
type Scheduler struct {
	cfg Config
	log *slog.Logger
	obs Observer

	mu      sync.Mutex
	jobs    map[string]*registered
	units   map[unitKey]*unit
	order   []*unit
	started bool
	queue   entryHeap
	wake    chan struct{}

	sem         chan struct{}
	claimCtx    context.Context
	claimCancel context.CancelFunc // stops claiming
	runCancel   context.CancelFunc // cancels running jobs
	wg          sync.WaitGroup
	stopOnce    sync.Once
	stopped     chan struct{}
}

type unitKey struct{ job, partition string }

// unit is one (job, partition): one lease, one line of slots.
type unit struct {
	job       *registered
	partition string
	lease     string

	// seen is the latest scheduled fire whose claim started (Start's
	// time before the first), guarded by Scheduler.mu: a slot at or before
	// it that nobody began when a claim starts was missed.
	seen time.Time

	mu      sync.Mutex
	busy    bool // a claim is running
	again   bool // a fire or wake-up arrived while busy
	pending cron.Fire
}

// New returns a Scheduler. It returns an error matching ErrInvalidConfig
// when Leases or Ledger is nil or MaxConcurrentClaims is negative.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Leases == nil {
		return nil, fmt.Errorf("%w: nil Leases", ErrInvalidConfig)
	}
	if cfg.Ledger == nil {
		return nil, fmt.Errorf("%w: nil Ledger", ErrInvalidConfig)
	}
	if cfg.MaxConcurrentClaims < 0 {
		return nil, fmt.Errorf("%w: negative MaxConcurrentClaims", ErrInvalidConfig)
	}
	if cfg.MaxConcurrentClaims == 0 {
		cfg.MaxConcurrentClaims = DefaultMaxConcurrentClaims
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	return &Scheduler{
		cfg: cfg, log: cfg.Logger, obs: cfg.Observer,
		jobs: map[string]*registered{}, units: map[unitKey]*unit{},
		wake: make(chan struct{}, 1), sem: make(chan struct{}, cfg.MaxConcurrentClaims),
		stopped: make(chan struct{}),
	}, nil
}

// Register adds a job. It must be called before Start.
//
// Errors: ErrInvalidJob (also wrapping cron.ErrInvalidSpec or
// cron.ErrUnknownZone), ErrDuplicateJob, ErrStarted.
func (s *Scheduler) Register(job Job) error {
	if err := job.validate(); err != nil {
		return err
	}
	job = job.withDefaults()
	if _, ok := s.cfg.Ledger.(Canceler); job.Overlap == OverlapCancelOther && !ok {
		return fmt.Errorf("%w: %q: OverlapCancelOther needs a ledger that implements Canceler", ErrInvalidJob, job.Name)
	}
	sched, err := cron.Parse(job.Spec, cron.Options{Zone: job.Zone, Gap: job.Gap, Overlap: job.DSTOverlap})
	if err != nil {
		return fmt.Errorf("%w: %q: %w", ErrInvalidJob, job.Name, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return ErrStarted
	}
	if _, ok := s.jobs[job.Name]; ok {
		return fmt.Errorf("%w: %q", ErrDuplicateJob, job.Name)
	}
	r := &registered{Job: job, schedule: sched}
	s.jobs[job.Name] = r
	for _, p := range job.Partitions {
		u := &unit{job: r, partition: p, lease: leaseName(job.Name, p)}
		s.units[unitKey{job.Name, p}] = u
		s.order = append(s.order, u)
	}
	return nil
}

// Start begins claiming slots until Stop is called or ctx ends. One
// goroutine keeps the timers of every (job, partition); claims run on at
// most Config.MaxConcurrentClaims goroutines. Every (job, partition) is
// claimed once at start, to recover what came due while no replica ran
// (stored retries, abandoned attempts, missed slots). It returns
// ErrStarted when called twice.
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return ErrStarted
	}
	s.started = true
	runCtx, runCancel := context.WithCancel(context.WithoutCancel(ctx))
	claimCtx, claimCancel := context.WithCancel(ctx)
	s.claimCtx, s.runCancel, s.claimCancel = claimCtx, runCancel, claimCancel
	now := time.Now()
	for _, u := range s.order {
		u.seen = now
		if f, ok := s.next(u.job, now); ok {
			heap.Push(&s.queue, &entry{at: f.At, u: u, fire: f, scheduled: true})
		}
		// A recovery claim at start: retries whose time passed while no
		// replica ran, abandoned attempts and slots missed during the
		// downtime run now, not at the job's next fire (a day later for a
		// daily job).
		heap.Push(&s.queue, &entry{at: now, u: u})
	}
	s.wg.Go(func() { s.dispatch(claimCtx, runCtx) })
	return nil
}

// InterruptWait bounds how long Stop waits, after its grace period, for
// canceled attempts to return and be recorded (5 s).
const InterruptWait = 5 * time.Second

// Stop shuts down gracefully: it stops claiming, lets running attempts
// finish until ctx ends, then cancels them (they are recorded failed with
// ClassInterrupted and retried at a later claim), releases the leases and
// waits for every goroutine. A job function that ignores its ctx cannot be
// stopped: Stop then returns ctx's error at most InterruptWait after ctx
// ended, leaving that attempt running; call Stop again to wait for it.
// Stop is safe to call twice; called before Start it makes a later Start
// return ErrStarted. It returns ctx's error when the grace period ran out.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.mu.Lock()
	if !s.started {
		s.started = true // nothing to stop; Start is refused from now on
		s.mu.Unlock()
		return nil
	}
	claimCancel := s.claimCancel
	s.mu.Unlock()
	if claimCancel == nil {
		return nil // stopped before start
	}
	s.stopOnce.Do(func() {
		claimCancel()
		go func() {
			s.wg.Wait()
			close(s.stopped)
		}()
	})
	select {
	case <-s.stopped:
		s.runCancel()
		return nil
	case <-ctx.Done():
	}
	s.runCancel()
	wait := time.NewTimer(InterruptWait)
	defer wait.Stop()
	select {
	case <-s.stopped:
	case <-wait.C:
	}
	return ctx.Err()
}

// next returns job's first fire strictly after t within [StartAt, EndAt).
func (s *Scheduler) next(job *registered, t time.Time) (cron.Fire, bool) {
	if !job.StartAt.IsZero() && t.Before(job.StartAt) {
		t = job.StartAt.Add(-time.Second)
	}
	fire, ok := job.schedule.Next(t)
	if !ok || (!job.EndAt.IsZero() && !fire.At.Before(job.EndAt)) {
		return cron.Fire{}, false
	}
	return fire, true
}

// entry is a timer: a scheduled fire of a unit, or a wake-up (a retry
// falls due, an operator asked for a run).
type entry struct {
	at        time.Time
	u         *unit
	fire      cron.Fire
	prev      time.Time // the unit's scheduled fire before fire, zero if unknown
	scheduled bool
	index     int
}

type entryHeap []*entry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h entryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *entryHeap) Push(x any)        { e := x.(*entry); e.index = len(*h); *h = append(*h, e) }
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// wakeAt asks for a claim of u at t (a retry's time, or now).
func (s *Scheduler) wakeAt(u *unit, t time.Time) {
	s.mu.Lock()
	heap.Push(&s.queue, &entry{at: t, u: u})
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// dispatch is the one timer goroutine: it pops due entries, schedules each
// unit's next fire and hands the claims to the bounded pool.
func (s *Scheduler) dispatch(claimCtx, runCtx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		now := time.Now()
		var due []*entry
		for s.queue.Len() > 0 && !s.queue[0].at.After(now) {
			e := heap.Pop(&s.queue).(*entry)
			due = append(due, e)
			if e.scheduled {
				if f, ok := s.next(e.u.job, e.fire.At); ok {
					heap.Push(&s.queue, &entry{at: f.At, u: e.u, fire: f, prev: e.fire.At, scheduled: true})
				}
			}
		}
		wait := time.Hour
		if s.queue.Len() > 0 {
			wait = time.Until(s.queue[0].at)
		}
		s.mu.Unlock()
		s.triggerAll(claimCtx, runCtx, due)
		timer.Reset(wait)
		select {
		case <-claimCtx.Done():
			return
		case <-s.wake:
		case <-timer.C:
		}
	}
}

// maxClaimBatch bounds the leases one batch acquisition asks for.
const maxClaimBatch = 256

// triggerAll starts the claims of due entries. The scheduled fires of idle
// units, which come due together at a second's boundary, take their leases
// in batches (lease.Client.TryAcquireAll: one round trip per batch on a
// single Redis), each batch no larger than the free places in the pool, so
// a replica takes no more leases than it can run at once and the others
// get the rest. Wake-ups and OverlapCancelOther fires claim one by one.
func (s *Scheduler) triggerAll(claimCtx, runCtx context.Context, due []*entry) {
	batches := map[time.Duration][]*entry{}
	for _, e := range due {
		if !e.scheduled || e.u.job.Overlap == OverlapCancelOther {
			s.trigger(claimCtx, runCtx, e)
			continue
		}
		if s.markBusy(e) {
			ttl := e.u.job.LeaseTTL
			batches[ttl] = append(batches[ttl], e)
		}
	}
	for ttl, es := range batches {
		s.wg.Go(func() { s.claimBatches(claimCtx, runCtx, ttl, es) })
	}
}

// markBusy marks e's unit busy and reports true, or, when a claim of it
// is running, leaves that claim a note to look again when it is done.
func (s *Scheduler) markBusy(e *entry) bool {
	u := e.u
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.busy {
		u.again = true
		if e.scheduled {
			u.pending = e.fire
		}
		return false
	}
	u.busy = true
	return true
}

// trigger starts a claim of e's unit, or, when one is running, leaves it a
// note to look again when it is done.
func (s *Scheduler) trigger(claimCtx, runCtx context.Context, e *entry) {
	if !s.markBusy(e) {
		return
	}
	s.wg.Go(func() {
		select {
		case s.sem <- struct{}{}:
		case <-claimCtx.Done():
			s.idle(e.u)
			return
		}
		defer func() { <-s.sem }()
		s.unitLoop(claimCtx, runCtx, e, nil, nil)
	})
}

// claimBatches claims the busy units of es, whose leases share ttl: it
// takes places in the pool, acquires that many leases in one batch, hands
// each lease won to a claim and gives the other places back, until es is
// done or claiming stops.
func (s *Scheduler) claimBatches(claimCtx, runCtx context.Context, ttl time.Duration, es []*entry) {
	for len(es) > 0 {
		k := s.takePlaces(claimCtx, min(len(es), maxClaimBatch))
		if k == 0 {
			for _, e := range es {
				s.idle(e.u)
			}
			return
		}
		chunk := es[:k]
		es = es[k:]
		names := make([]string, k)
		for i, e := range chunk {
			names[i] = e.u.lease
		}
		leases, errs := s.cfg.Leases.TryAcquireAll(runCtx, names, ttl, lease.WithLifetime(runCtx))
		pre := s.fastBeginAll(claimCtx, runCtx, chunk, leases)
		for i, e := range chunk {
			if errs[i] == nil {
				l, p := leases[i], pre[i]
				s.wg.Go(func() {
					defer func() { <-s.sem }()
					s.unitLoop(claimCtx, runCtx, e, l, p)
				})
				continue
			}
			s.noteSeen(e.u, e.fire, true)
			s.claimSkipped(claimCtx, e.u, e.fire, errs[i])
			if next, ok := s.again(claimCtx, e.u); ok {
				s.wg.Go(func() {
					defer func() { <-s.sem }()
					s.unitLoop(claimCtx, runCtx, next, nil, nil)
				})
				continue
			}
			<-s.sem
		}
	}
}

// fastBeginAll makes the ClearBeginner requests of the fires of chunk whose
// leases were won, in one call (one round trip on the Redis ledger), and
// returns the answers by index (nil where none was asked). Once claiming
// stopped it begins nothing.
func (s *Scheduler) fastBeginAll(claimCtx, ctx context.Context, chunk []*entry, leases []*lease.Lease) []*BeginResult {
	pre := make([]*BeginResult, len(chunk))
	cb, ok := s.cfg.Ledger.(ClearBeginner)
	if !ok || claimCtx.Err() != nil {
		return pre
	}
	now := time.Now()
	var reqs []BeginRequest
	var at []int
	for i, e := range chunk {
		l := leases[i]
		if l == nil {
			continue
		}
		if req, ok := s.fastRequest(e.u, Fence{Token: l.Token(), Owner: l.Owner()}, e.fire, e.prev, now); ok {
			reqs = append(reqs, req)
			at = append(at, i)
		}
	}
	if len(reqs) == 0 {
		return pre
	}
	for j, res := range cb.BeginIfClear(ctx, reqs, now) {
		pre[at[j]] = &res
	}
	return pre
}

// takePlaces takes between 1 and n places in the pool: it waits for the
// first, then takes those that are free. 0 when claimCtx ends first.
func (s *Scheduler) takePlaces(claimCtx context.Context, n int) int {
	select {
	case s.sem <- struct{}{}:
	case <-claimCtx.Done():
		return 0
	}
	k := 1
	for k < n {
		select {
		case s.sem <- struct{}{}:
			k++
		default:
			return k
		}
	}
	return k
}

// unitLoop claims e's unit, then again for every fire or wake-up that
// arrived meanwhile, and marks the unit idle. The caller holds a place in
// the pool. held, when not nil, is the unit's lease, already acquired for
// e's fire, and pre the ledger's answer to its fast request (nil: none
// made).
func (s *Scheduler) unitLoop(claimCtx, runCtx context.Context, e *entry, held *lease.Lease, pre *BeginResult) {
	for {
		if held != nil {
			seen := s.noteSeen(e.u, e.fire, e.scheduled)
			s.claimHeld(claimCtx, runCtx, e.u, e.fire, e.prev, e.scheduled, seen, held, pre)
			held = nil
		} else {
			s.claim(claimCtx, runCtx, e.u, e.fire, e.prev, e.scheduled)
		}
		next, ok := s.again(claimCtx, e.u)
		if !ok {
			return
		}
		e = next
	}
}

// again returns what arrived for u while it was busy (a scheduled fire, or
// a wake-up), or marks u idle and returns false.
func (s *Scheduler) again(claimCtx context.Context, u *unit) (*entry, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.again || claimCtx.Err() != nil {
		u.busy = false
		return nil, false
	}
	u.again = false
	e := &entry{u: u, fire: u.pending, scheduled: !u.pending.At.IsZero()}
	u.pending = cron.Fire{}
	return e, true
}

// idle marks u idle.
func (s *Scheduler) idle(u *unit) {
	u.mu.Lock()
	u.busy = false
	u.mu.Unlock()
}
