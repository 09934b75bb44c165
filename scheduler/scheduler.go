package scheduler

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/internal/redact"
	"github.com/holdfast-go/holdfast/internal/safe"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler/cron"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// ErrInvalidOptions matches every Options that New rejects.
var ErrInvalidOptions = errors.New("scheduler: invalid options")

// ErrNotCreated is returned by the methods of a nil Scheduler, or of one
// not made by New (a zero Scheduler{}).
var ErrNotCreated = errors.New("scheduler: not created with New")

// DefaultMaxConcurrentClaims bounds the claims (and runs) one Scheduler
// works on at once (64).
const DefaultMaxConcurrentClaims = 64

// Options configures a Scheduler.
type Options struct {
	// Leases acquires the job leases. Required.
	Leases *lease.Client
	// Ledger records runs. Required; redisledger.New gives the default
	// store, pgledger.New a Postgres one (packages under
	// scheduler/ledger).
	Ledger ledger.Ledger
	// Logger receives job_claimed, job_claim_skipped, job_run_finished,
	// slot_skipped, slots_unrecorded, clock_stepped, clock_jumped,
	// ledger_reset and stale_token_rejected events. Default: discard.
	Logger *slog.Logger
	// Observer receives measurements (see scheduler/schedprom).
	Observer Observer
	// MaxConcurrentClaims bounds how many (job, partition) claims run at
	// once on this replica. Default DefaultMaxConcurrentClaims.
	MaxConcurrentClaims int
	// Clock is the time source of every decision: slot timers, lateness,
	// retry times, heartbeats, Job.Timeout, and the now passed to every
	// ledger call. Default clock.Real() (which follows testing/synctest).
	// Tests pass a *clock.Fake to step the wall clock, freeze time or skew
	// replicas. The lease's own trust window stays on the real clock
	// (lease.Client). A typed nil is refused (ErrInvalidOptions).
	Clock clock.Clock
	// Jitter is the random source of the retry backoff's jitter. Default:
	// a PCG seeded at random. Tests pass rand.NewPCG(1, 2) for repeatable
	// retry times.
	Jitter rand.Source
	// Retention, when positive, prunes the ledger while the Scheduler
	// runs: every PruneInterval(Retention) one replica (the holder of the
	// lease PruneLease) calls ledger.Pruner's Prune with a cutoff of now
	// minus Retention. The Ledger must implement ledger.Pruner
	// (ErrInvalidOptions otherwise). Prune keeps what catch-up reads (open
	// slots, each pair's latest slot, horizons, fences), so Retention may
	// be shorter than a CatchUpWindow; it bounds how long operators see
	// done records. 0 (the default) prunes nothing: call Prune yourself
	// (`holdfast prune`, a cron job). Negative is refused.
	Retention time.Duration
	// Holder is this replica's holder label: recorded with every attempt
	// it begins (ledger.Attempt.Holder) and logged with its job events,
	// so views (the admin API, the console, holdfast runs) and logs tell
	// which replica ran a slot without showing the lease owner, which is
	// a write capability (see fence.OwnerID). Default: the Leases
	// client's label (lease.Options.Holder) when it has one, else the
	// host name (os.Hostname, read once by New; none when it fails or is
	// not a valid label). lease.CheckHolder's rules apply
	// (ErrInvalidOptions). The leases themselves show the Leases
	// client's label: give lease.Options.Holder the same value.
	Holder string
	// Redact masks secrets in the text of a failed job's error at the one
	// place it becomes text, before anything stores or shows it: the
	// error the ledger stores (so the admin API, the console and `holdfast
	// runs` show it masked) and the job_run_finished event's error
	// attribute. Runs and Record apply it again to what they read, for
	// records stored before it was set or by a replica that lacks it, so
	// it must leave its own output unchanged. Default DefaultRedact (URL
	// passwords, password=/token:/"api_key":"..." values, Bearer
	// credentials). Wrap DefaultRedact to mask more; pass a function
	// that returns its argument to store errors as they are.
	Redact func(string) string
}

// DefaultRedact is the default Options.Redact: it masks the password of a
// URL's userinfo, any scheme (postgres://user:s3cret@db becomes
// postgres://user:***@db, redis://:s3cret@h becomes redis://:***@h), the
// value of a key naming a secret (password, passwd, pwd, secret, token,
// api_key or apikey, access_key, private_key, credential, authorization;
// any case; as k=v, k: v, "k":"v") and a Bearer credential, with "***".
// It is a best effort over free text: a secret in a form it does not know
// passes through, so jobs should not put secrets in their errors.
func DefaultRedact(s string) string { return redact.String(s) }

// Scheduler turns cron ticks into slots and runs each slot once, under the
// lease of its (job, partition), recording every attempt in the ledger.
// Create it with New, Register jobs, then Start; Stop drains it.
type Scheduler struct {
	cfg Options
	log *slog.Logger
	obs Observer

	clock  clock.Clock
	randMu sync.Mutex
	rand   *rand.Rand

	mu      sync.Mutex
	jobs    map[string]*registered
	units   map[unitKey]*unit
	order   []*unit
	started bool
	queue   entryHeap
	wake    chan struct{}
	woken   bool         // the queue changed since the dispatcher last read it
	parked  parkedAt     // the dispatcher's current sleep (zero: awake)
	active  atomic.Int64 // units with a claim running, OverlapAllow runs, the recovery at Start
	waiting atomic.Int64 // claims asleep on the clock (replaceHolder), which tests tell from work

	// resetCheckOff turns the finding of a ledger reset off (reset.go):
	// a test hook, for the negative control of the data-loss tests.
	resetCheckOff bool

	joiner  ledger.LeaseJoiner // the ledger, when it joins the leases' backend; else nil
	grouped bool               // the joiner marks claim groups (ledger.ClaimGroupMarker)

	sem         chan struct{}
	life        lifetime
	claimCancel context.CancelFunc // stops claiming
	runCancel   context.CancelFunc // cancels running jobs
	wg          sync.WaitGroup
	stopOnce    sync.Once
	stopped     chan struct{}
}

// lifetime holds the two contexts of a started Scheduler (both
// context.Background before Start): claim ends when claiming stops (Stop,
// or Start's ctx ends); run ends when running attempts must stop (Stop's
// grace period ran out). Set once by Start, before any goroutine.
type lifetime struct {
	claim, run context.Context
}

// parkedAt is a sleep of the dispatcher: from at, for wait, on timer.
type parkedAt struct {
	at    time.Time
	wait  time.Duration
	timer clock.Timer
}

type unitKey struct{ job, partition string }

// unit is one (job, partition): one lease, one line of slots.
type unit struct {
	job       *registered
	partition string
	lease     string
	queued    *entry // the unit's next scheduled fire in the queue, guarded by Scheduler.mu
	// retryQueued: a retryClaim wake-up of the unit is in the queue,
	// guarded by Scheduler.mu.
	retryQueued bool

	// seen is the latest scheduled fire whose claim started (Start's
	// time before the first), guarded by Scheduler.mu: a slot at or before
	// it that nobody began when a claim starts was missed.
	seen time.Time
	mu   sync.Mutex
	// mem is what this replica saw of the unit's ledger (reset.go),
	// guarded by mu.
	mem     ledgerMemory
	busy    bool // a claim is running
	again   bool // a fire or wake-up arrived while busy
	pending cron.Fire
	// pendingAfterError: a retry after an error arrived while busy; the
	// claim of pending carries claimReq.afterError.
	pendingAfterError bool
}

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
	if err := lease.CheckHolder(cfg.Holder); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if cfg.Holder == "" {
		cfg.Holder = defaultHolder(cfg.Leases)
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
	return &Scheduler{
		cfg: cfg, log: cfg.Logger, obs: cfg.Observer, clock: cfg.Clock, rand: rand.New(cfg.Jitter),
		joiner: joiner, grouped: ok && marker.MarksClaimGroups(),
		life: lifetime{claim: context.Background(), run: context.Background()},
		jobs: map[string]*registered{}, units: map[unitKey]*unit{},
		wake: make(chan struct{}, 1), sem: make(chan struct{}, cfg.MaxConcurrentClaims),
		stopped: make(chan struct{}),
	}, nil
}

// defaultHolder is Options.Holder's default: the lease client's label,
// else the host name when it is a valid label, else none.
func defaultHolder(leases *lease.Client) string {
	if label := leases.HolderLabel(); label != "" {
		return label
	}
	host, err := os.Hostname()
	if err != nil || lease.CheckHolder(host) != nil {
		return ""
	}
	return host
}

// Register adds a job. It must be called before Start.
//
// Errors: ErrInvalidJob (also wrapping cron.ErrInvalidSpec or
// cron.ErrUnknownZone), ErrDuplicateJob, ErrStarted, ErrNotCreated.
func (s *Scheduler) Register(job Job) error {
	if err := s.ready(context.Background()); err != nil {
		return err
	}
	if err := job.validate(); err != nil {
		return err
	}
	job = job.withDefaults()
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
		return fmt.Errorf("%w: %q", ErrDuplicateJob, job.Name)
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
// Options.Eviction).
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
	now := s.clock.Now()
	sr, batched := s.cfg.Ledger.(ledger.StatesReader)
	for _, u := range s.order {
		u.seen = now
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

// InterruptWait bounds how long Stop waits, after its grace period, for
// canceled attempts to return and be recorded (5 s).
const InterruptWait = 5 * time.Second

// Stop shuts down gracefully: it stops claiming, lets running attempts
// finish until ctx ends, then cancels them (context cause ErrShutdown;
// they are recorded failed with ClassInterrupted and retried at a later
// claim) and releases their leases, releases every other lease and waits
// for every goroutine. A job function that ignores its ctx cannot be
// stopped: Stop then returns ctx's error at most InterruptWait after ctx
// ended, leaving that attempt running; call Stop again to wait for it.
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
	clock.Sleep(s.clock, InterruptWait, s.stopped)
	return ctx.Err()
}
