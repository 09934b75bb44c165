package scheduler

import (
	"container/heap"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"time"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/internal/safe"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/leasejoin"
	"github.com/holdfast-go/holdfast/scheduler/cron"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// New returns a Scheduler. It returns an error matching ErrInvalidOptions
// when Leases or Ledger is nil (a typed nil pointer too), Holder is not a
// valid holder label, or
// MaxConcurrentClaims is negative.
func New(cfg Options) (*Scheduler, error) {
	if cfg.Leases == nil {
		return nil, fmt.Errorf("%w: nil Leases", ErrInvalidOptions)
	}
	if safe.IsNil(cfg.Ledger) {
		return nil, fmt.Errorf("%w: nil Ledger", ErrInvalidOptions)
	}
	if cfg.Clock != nil && safe.IsNil(cfg.Clock) {
		return nil, fmt.Errorf("%w: nil Clock", ErrInvalidOptions)
	}
	if err := checkRetention(cfg); err != nil {
		return nil, err
	}
	if cfg.MaxConcurrentClaims < 0 {
		return nil, fmt.Errorf("%w: negative MaxConcurrentClaims", ErrInvalidOptions)
	}
	if err := leasedriver.CheckHolder(cfg.Holder); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if cfg.Holder == "" {
		cfg.Holder = defaultHolder(cfg.Leases)
	}
	if cfg.MaxConcurrentClaims == 0 {
		cfg.MaxConcurrentClaims = defaultMaxConcurrentClaims
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Observer == nil {
		cfg.Observer = nopObserver{}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Redact == nil {
		cfg.Redact = DefaultRedact
	}
	if cfg.Jitter == nil {
		cfg.Jitter = rand.NewPCG(rand.Uint64(), rand.Uint64())
	}
	joiner := joinerOf(cfg)
	marker, ok := joiner.(ledger.ClaimGroupMarker)
	_, fake := cfg.Clock.(interface{ Armed(clock.Timer) bool })
	s := &Scheduler{
		cfg: cfg, log: cfg.Logger, obs: cfg.Observer, clock: cfg.Clock, rand: rand.New(cfg.Jitter),
		trackBeats: fake, joiner: joiner, grouped: ok && marker.MarksClaimGroups(), tr: newTracer(cfg.TracerProvider),
		life: lifetime{claim: context.Background(), run: context.Background()},
		jobs: map[string]*registered{}, units: map[unitKey]*unit{},
		wake: make(chan struct{}, 1), sem: make(chan struct{}, cfg.MaxConcurrentClaims),
		stopped: make(chan struct{}),
	}
	s.claims = newClaimGate(s.wg.Go, s.finishLater)
	return s, nil
}

// defaultHolder is Options.Holder's default: the lease client's label,
// else the host name when it is a valid label, else none.
func defaultHolder(leases *lease.Client) string {
	if lb, ok := leasejoin.Backend(leases).(leasedriver.Labeled); ok && lb.HolderLabel() != "" {
		return lb.HolderLabel()
	}
	host, err := os.Hostname()
	if err != nil || leasedriver.CheckHolder(host) != nil {
		return ""
	}
	return host
}

// Register adds a job. It must be called before Start.
//
// Errors: ErrInvalidJob (also wrapping cron.ErrInvalidSpec or
// cron.ErrUnknownZone; a name already registered), ErrStarted, ErrNotCreated.
func (s *Scheduler) Register(job Job) error {
	if err := s.ready(context.Background()); err != nil {
		return err
	}
	if err := job.validate(); err != nil {
		return err
	}
	job = job.withDefaults()
	if len(job.SlotScopeSinks) > 0 {
		switch {
		case s.cfg.Retention == 0:
			return fmt.Errorf("%w: %q: SlotScopeSinks are pruned with the ledger: set Options.Retention", ErrInvalidJob, job.Name)
		case job.Timeout <= 0 || job.Timeout >= s.cfg.Retention:
			return fmt.Errorf("%w: %q: SlotScopeSinks need a Timeout below Options.Retention (%v), have %v: a slot pruned in the sinks refuses its run's writes",
				ErrInvalidJob, job.Name, s.cfg.Retention, job.Timeout)
		}
	}
	if _, ok := s.cfg.Ledger.(ledger.Canceler); job.Overlap == OverlapCancelOther && !ok {
		return fmt.Errorf("%w: %q: OverlapCancelOther needs a ledger that implements Canceler", ErrInvalidJob, job.Name)
	}
	sched, err := cron.Parse(job.Spec, cron.Options{Zone: job.Zone, Gap: job.DSTGap, Fold: job.DSTFold})
	if err != nil {
		return fmt.Errorf("%w: %q: %w", ErrInvalidJob, job.Name, err)
	}
	if err := s.add(job, sched); err != nil {
		return err
	}
	// Logged once the job is in, outside s.mu: a slow log handler holds up
	// no other call.
	if now := s.clock.Now(); !job.EndAt.IsZero() && !job.EndAt.After(now) {
		s.log.LogAttrs(context.Background(), slog.LevelWarn, "job_window_ended", slog.String("job", job.Name),
			slog.Time("end_at", job.EndAt.UTC()), slog.String("effect", "no slot comes due; its slots can still be listed and retried"))
	}
	return nil
}

// add enters a validated job and its units.
func (s *Scheduler) add(job Job, sched *cron.Schedule) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return ErrStarted
	}
	if _, ok := s.jobs[job.Name]; ok {
		return fmt.Errorf("%w: %q is already registered", ErrInvalidJob, job.Name)
	}
	r := &registered{Job: job, window: newWindow(sched, job)}
	s.jobs[job.Name] = r
	for _, p := range job.Partitions {
		u := &unit{job: r, partition: p, lease: ledger.UnitScope(job.Name, p)}
		s.units[unitKey{job.Name, p}] = u
		s.order = append(s.order, u)
	}
	return nil
}

// Start begins claiming slots until Stop is called or ctx ends. One
// goroutine keeps the timers of every (job, partition); claims run on at
// most Options.MaxConcurrentClaims goroutines. Every (job, partition) is
// claimed once at start, to recover what came due while no replica ran
// (stored retries, abandoned attempts, missed slots): the recovery reads
// the ledger first (a ledger.StatesReader in batches) and takes a unit's
// lease only when there is something to do. It returns ErrStarted when
// called twice, and, before it claims anything, an error matching
// lease.ErrEvictionPolicy (or lease.ErrEvictionPolicyUnknown) when the
// lease backend's or the ledger's Redis may evict keys (see their
// Options.Eviction), or one matching fence.ErrUnknownFormat (a
// *fence.FormatError) when either (on Redis) finds another stored format,
// or another store's marker, under its prefix (docs/compatibility.md).
func (s *Scheduler) Start(ctx context.Context) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	if err := s.checkPolicies(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return ErrStarted
	}
	s.started = true
	runCtx, runCancel := context.WithCancel(context.WithoutCancel(ctx))
	claimCtx, claimCancel := context.WithCancel(ctx)
	s.life = lifetime{claim: claimCtx, run: runCtx}
	s.runCancel, s.claimCancel = runCancel, claimCancel
	// Past the grace period no record waits for the batch claims.
	context.AfterFunc(runCtx, s.claims.end)
	now := s.clock.Now()
	sr, batched := s.cfg.Ledger.(ledger.StatesReader)
	for _, u := range s.order {
		u.seen = instantOf(now)
		s.schedule(u, now, time.Time{})
		// A recovery claim at start: retries whose time passed while no
		// replica ran, abandoned attempts and slots missed during the
		// downtime run now, not at the job's next fire (a day later for a
		// daily job). It reads the ledger first and takes the lease only
		// when there is something to do (recoveryNeeded); a StatesReader
		// reads the units in batches (recoverAll).
		if !batched {
			heap.Push(&s.queue, &entry{at: now, u: u, req: claimReq{recovery: true}})
		}
	}
	if batched {
		s.active.Add(1) // busy until it queued its claims
		s.wg.Go(func() {
			defer s.active.Add(-1)
			s.recoverAll(sr, s.order) // s.order is fixed once started
		})
	}
	s.wg.Go(s.dispatch)
	if s.cfg.Retention > 0 {
		s.wg.Go(s.pruneLoop)
	}
	return nil
}

// interruptWait bounds how long Stop waits, after its grace period, for
// canceled attempts to return and be recorded (5 s).
const interruptWait = 5 * time.Second

// Stop shuts down gracefully: it stops claiming, lets running attempts
// finish until ctx ends, then cancels them (context cause ErrInterrupted;
// they are recorded failed with ClassInterrupted and retried at a later
// claim) and releases their leases, releases every other lease and waits
// for every goroutine. A job function that ignores its ctx cannot be
// stopped: Stop then returns ctx's error at most 5 s after ctx ended,
// leaving that attempt running; call Stop again to wait for it. Outcomes
// still being recorded when ctx ends (up to 256 goroutines record a
// burst's, one after the other: an Observer or a Logger handler that
// blocks holds them up) make Stop return ctx's error the same way.
// Stop is safe to call twice; called before Start it makes a later Start
// return ErrStarted. It returns ctx's error when the grace period ran out.
func (s *Scheduler) Stop(ctx context.Context) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
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
	clock.Sleep(s.clock, interruptWait, s.stopped)
	return ctx.Err()
}
