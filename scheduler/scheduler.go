package scheduler

import (
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

// Config configures a Scheduler.
type Config struct {
	// Leases acquires the job leases. Required.
	Leases *lease.Client
	// Ledger records runs. Required; NewRedisLedger gives the default
	// store.
	Ledger Ledger
	// Logger receives job_claimed, job_claim_skipped, job_run_finished and
	// stale_token_rejected events. Default: discard.
	Logger *slog.Logger
}

// Scheduler turns cron ticks into slots and runs each slot once, under the
// job's lease, recording every attempt in the ledger. Create it with New,
// Register jobs, then Start; Stop drains it.
type Scheduler struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	jobs    map[string]*registered
	order   []*registered
	started bool

	claimCancel context.CancelFunc // stops claiming
	runCancel   context.CancelFunc // cancels running jobs
	wg          sync.WaitGroup
	stopOnce    sync.Once
	stopped     chan struct{}
}

// New returns a Scheduler. It returns an error matching ErrInvalidConfig
// when Leases or Ledger is nil.
func New(cfg Config) (*Scheduler, error) {
	if cfg.Leases == nil {
		return nil, fmt.Errorf("%w: nil Leases", ErrInvalidConfig)
	}
	if cfg.Ledger == nil {
		return nil, fmt.Errorf("%w: nil Ledger", ErrInvalidConfig)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{cfg: cfg, log: cfg.Logger, jobs: map[string]*registered{}, stopped: make(chan struct{})}, nil
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
	sched, err := cron.Parse(job.Spec, cron.Options{Zone: job.Zone})
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
	s.order = append(s.order, r)
	return nil
}

// Start begins claiming slots, one goroutine per job, until Stop is called
// or ctx ends. It returns ErrStarted when called twice.
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return ErrStarted
	}
	s.started = true
	runCtx, runCancel := context.WithCancel(context.WithoutCancel(ctx))
	claimCtx, claimCancel := context.WithCancel(ctx)
	s.runCancel, s.claimCancel = runCancel, claimCancel
	for _, job := range s.order {
		s.wg.Go(func() { s.loop(claimCtx, runCtx, job) })
	}
	return nil
}

// Stop shuts down gracefully: it stops claiming, lets running attempts
// finish until ctx ends, then cancels them (they are recorded as failed,
// "interrupted", and retried at a later claim), releases the leases and
// waits for every goroutine. It is safe to call twice and before Start.
// It returns ctx's error when the grace period ran out.
func (s *Scheduler) Stop(ctx context.Context) error {
	s.mu.Lock()
	started := s.started
	s.mu.Unlock()
	if !started {
		return nil
	}
	s.stopOnce.Do(func() {
		s.claimCancel()
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
		s.runCancel()
		<-s.stopped
		return ctx.Err()
	}
}

// loop waits for each fire time of job and claims it, until claimCtx ends.
func (s *Scheduler) loop(claimCtx, runCtx context.Context, job *registered) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	after := time.Now()
	for {
		fire, ok := s.next(job, after)
		if !ok {
			return
		}
		timer.Reset(time.Until(fire.At))
		select {
		case <-claimCtx.Done():
			return
		case <-timer.C:
		}
		checked := s.claim(claimCtx, runCtx, job, fire)
		// The claim ran every slot due by its last look at the ledger;
		// the loop waits for the first one after that. Resuming after
		// the current time instead would skip a slot that came due
		// between that look and the lease's release, while the other
		// replicas skipped it because the lease was still held.
		after = fire.At
		if checked.After(after) {
			after = checked
		}
	}
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
