package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/logattr"
	"github.com/holdfast-go/holdfast/internal/retry"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/leasejoin"
	"github.com/holdfast-go/holdfast/scheduler/cron"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// One attempt's life, in the order it is lived. A claim (claim.go,
// overlap.go) holds the unit's lease (hold) and calls in here:
//
//	claimed --begin--> begun --run--> running --end--> ended --Finish--> recorded
//	   |                 |                |               |                  |
//	   skip (recorded    refused (done,   heartbeat;      decideOutcome:     wakeAt(RetryAt):
//	   skipped/missed)   stale, store     ctx ends with   status, class,     the retry's claim
//	                     error: settled)  the lease,      retry time         (queue.go)
//	                                      Timeout,
//	                                      shutdown,
//	                                      replacement
//
// begin writes the attempt under the lease's fence (attempt n, budget
// left); run runs the job function (runJob, panics caught) with the
// heartbeat and the timeout; outcome gathers how it ended and
// decideOutcome, a pure function of that and now, decides it; the record
// goes through Finish, or FinishRelease on a ledger that joins the leases
// when the claim ends after it (finishRelease: recorded and released in
// one step); a retry time wakes the unit again. settled says which errors
// leave a slot decided and classify which class an error has: the one
// place each rule lives.

// skip records a step's slot skipped or missed. Its error, logged
// already, is the ledger's.
func (s *Scheduler) skip(h hold, st step) error {
	slot := h.slot(st.fire.At)
	if err := s.cfg.Ledger.Skip(h.ctx(), slot, h.fence, st.skip, st.reason, s.clock.Now()); err != nil {
		s.ledgerRefused(h.ctx(), slot, opSkip, err)
		return err
	}
	s.obs.SlotSkipped(h.u.job.Name, st.skip)
	traceEvent(h.ctx(), eventSkipped, slot, attribute.String("holdfast.status", string(st.skip)), attribute.String("holdfast.reason", st.reason))
	s.log.LogAttrs(h.ctx(), slog.LevelInfo, "slot_skipped", slog.String("job", slot.Job),
		slog.String("partition", slot.Partition), slog.Time("slot", slot.At),
		slog.String("status", string(st.skip)), slog.String("reason", st.reason))
	return nil
}

// attempt runs one attempt of slot f under h, fenced in the ledger; open
// is the step's (step.open). It reports whether the job function ran, and
// Begin's error (logged) when it did not.
func (s *Scheduler) attempt(h hold, f cron.Fire, open bool) (ran bool, err error) {
	n, left, err := s.begin(h, h.fence, f)
	if err != nil {
		return false, err
	}
	s.run(h, f, n, left, false, open)
	return true, nil
}

// begin starts the next attempt of slot f in the ledger, fenced with fen.
// An error (done, stale, the ledger failing) is logged and returned: no
// attempt was begun.
func (s *Scheduler) begin(h hold, fen ledger.Fence, f cron.Fire) (n, left int, err error) {
	slot := h.slot(f.At)
	n, left, err = s.cfg.Ledger.Begin(h.ctx(), slot, fen, h.u.job.MaxAttempts, s.clock.Now())
	if err != nil {
		s.ledgerRefused(h.ctx(), slot, opBegin, err)
		return 0, 0, err
	}
	return n, left, nil
}

// settled reports whether a step that ended with err leaves its slot
// decided: it was carried out, or the ledger or the lease refused it for
// a reason of their own (the slot is done or running elsewhere, this
// holder's token is stale). Any other error (Redis or PostgreSQL failing,
// a lease grant too slow to use) left the slot untouched: the claim stops
// there and tries again later, because beginning a later slot would move
// the ledger's last begun slot past this one and no claim would look at it
// again (a lost slot, seen by the chaos scenario scheduler-mix).
func settled(err error) bool {
	return err == nil || errors.Is(err, ledger.ErrSlotDone) || errors.Is(err, ledger.ErrSlotRunning) ||
		errors.Is(err, fence.ErrStaleToken) || errors.Is(err, lease.ErrNotAcquired)
}

// newRun is the one place a Run is built: what the job function receives
// for attempt n of slot f under h.
func (s *Scheduler) newRun(h hold, f cron.Fire, n int) Run {
	slot := h.slot(f.At)
	return Run{
		Slot: slot, Local: f.Local, Zone: h.u.job.window.sched.Zone().String(), BusinessDate: f.BusinessDate, Rule: f.Rule,
		Attempt: n, Token: h.fence.Token, Owner: h.fence.Owner, Scope: h.l.Name(), IdempotencyKey: slot.IdempotencyKey(),
	}
}

// run runs attempt n of slot f, begun under h, and records how it ended.
// The job's ctx ends when h's lease ends, Job.Timeout passes (on the
// scheduler's clock), the scheduler's grace period ends, or a newer slot
// replaces the run (OverlapCancelOther). With last, the claim ends after
// this run unless a later slot came due meanwhile: then, on a ledger that
// joins the leases (Scheduler.joiner), the outcome is recorded and h's
// lease released in one step, and run reports released. Where that
// record may wait for the batch claims under way (Scheduler.grouped),
// run returns it as d, not yet made: the claim's end is then the
// caller's (unitFrom hands it to the claimGate). open says the ledger
// listed the slot (step.open): its lag is not the schedule's
// (ScheduleLagObserver).
func (s *Scheduler) run(h hold, f cron.Fire, n, left int, last, open bool) (released bool, d *later) {
	job := h.u.job
	ctx := h.ctx()
	run := s.newRun(h, f, n)
	lag := s.clock.Now().Sub(f.At)
	s.obs.RunStarted(job.Name, lag)
	if lo, ok := s.obs.(ScheduleLagObserver); ok && n == 1 && !open {
		lo.ScheduleLag(job.Name, lag)
	}
	s.logClaimed(ctx, &h, f, n, lag)

	runCtx, cancel := context.WithCancelCause(ctx)
	runCtx, span := s.traceAttempt(runCtx, run)
	// Shutdown past the grace period ends the run and releases its lease,
	// explicitly (the lease's life is not bound to the scheduler's
	// context): another replica may take the slot over while a job that
	// ignores its ctx goes on, its later writes fenced off.
	shutDone := make(chan struct{})
	stopShutdown := context.AfterFunc(s.life.run, func() {
		defer close(shutDone)
		cancel(errShutdown)
		s.release(h.l)
	})
	stopTimeout := s.afterTimeout(job.Timeout, cancel)
	stopBeat := s.heartbeat(runCtx, run.Slot, h.fence, n, job, cancel)
	started := s.clock.Now()
	runErr := runJob(runCtx, job.Run, run)
	stopBeat()
	stopTimeout()
	if !stopShutdown() {
		<-shutDone // it ran: wait for the release
	}
	cause := context.Cause(runCtx)
	timedOut, replaced := errors.Is(cause, errTimeout), errors.Is(cause, errReplaced)
	cancel(nil)

	o := s.outcome(h, run.Slot, runErr, timedOut, replaced, left)
	endAttempt(span, o)
	took := s.clock.Now().Sub(started)
	release := false
	if last && s.joiner != nil && !s.dueAfter(h.u, f) {
		// The claim ends with this step: its place goes back to the
		// pool, and where finishes are joined (off Cluster: claim groups
		// are marked there too) the record may wait for the batch claims
		// under way (claimGate), as data.
		h.place.giveBack()
		release = true
		if s.grouped {
			return true, &later{h: h, f: f, n: n, o: o, took: took, release: true}
		}
	}
	s.recordNow(h, f, n, &o, took, release)
	return release, nil
}

// recordNow records the outcome o of a run that does not wait (record),
// from a frame of its own: the record's fields are not in run's frame,
// nor on the heap.
//
//go:noinline
func (s *Scheduler) recordNow(h hold, f cron.Fire, n int, o *ledger.Outcome, took time.Duration, release bool) {
	r := later{h: h, f: f, n: n, o: *o, took: took, release: release}
	s.record(&r)
}

// later is a run's outcome to record (record): attempt n of slot f under
// h, which took took. With release, the record releases h's lease too
// (finishRelease). A claim that ends with one (run's d) ends with
// endClaim: at once, or, while batch claims are under way, once they
// ended (claimGate, finishLater); h.place is the claim's place in the
// pool (unitFrom's), given back already.
type later struct {
	h       hold
	f       cron.Fire
	n       int
	o       ledger.Outcome
	took    time.Duration
	release bool
	endSpan func() // the claim's span (claimHeld)
	after   uint64 // the last batch claim it waits for (claimGate)
}

// record records r's outcome. The ledger write must go through even though
// the lease's ctx may have ended: the fence, not the context, decides
// whether it is still ours to make.
func (s *Scheduler) record(r *later) {
	h, slot := r.h, r.h.slot(r.f.At)
	ctx := h.ctx()
	var err error
	if r.release {
		err = s.finishRelease(context.WithoutCancel(ctx), h, slot, r.n, r.o)
	} else {
		err = s.cfg.Ledger.Finish(context.WithoutCancel(ctx), slot, h.fence, r.n, r.o, s.clock.Now())
	}
	if err != nil {
		s.ledgerRefused(ctx, slot, opFinish, err)
		return
	}
	job := h.u.job
	s.obs.RunCompleted(job.Name, r.o.Status, r.took, s.clock.Now())
	if r.o.Status == ledger.StatusFailed {
		s.obs.RunFailed(job.Name, r.o.Class, r.o.RetryAt.IsZero())
	}
	if !r.o.RetryAt.IsZero() {
		s.wakeAt(h.u, r.o.RetryAt)
	}
	s.logFinished(ctx, &h, r.f, r.n, &r.o, r.took)
}

// endClaim ends the claim whose run returned r: it records r and ends
// the claim as claimHeld would (its span, its lease).
func (s *Scheduler) endClaim(r *later) {
	s.record(r)
	r.endSpan()
	s.release(r.h.l)
}

// finishLater is how the claimGate's finishers end a claim that waited:
// endClaim, then the unit goes on as unitFrom would, in a goroutine of its
// own when something arrived for it meanwhile (the finisher makes the
// next record).
func (s *Scheduler) finishLater(r *later) {
	s.endClaim(r)
	u, p := r.h.u, r.h.place
	next, ok := s.again(u)
	if !ok {
		return
	}
	s.wg.Go(func() {
		if !p.take() {
			s.idle(u)
			return
		}
		s.unitFrom(p, next, nil, nil)
	})
}

// logClaimed and logFinished are a run's log lines (run's and record's),
// in functions of their own so that their attributes are not in their
// callers' frames (see planLoop).
//
//go:noinline
func (s *Scheduler) logClaimed(ctx context.Context, h *hold, f cron.Fire, n int, lag time.Duration) {
	if !s.log.Enabled(ctx, slog.LevelInfo) { // the attributes cost allocations (owner_id, lag)
		return
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "job_claimed", slog.String("job", h.u.job.Name), slog.String("partition", h.u.partition),
		slog.Time("slot", f.At), slog.Int("attempt", n), slog.Uint64("token", uint64(h.fence.Token)),
		slog.String("owner_id", fence.OwnerID(h.fence.Owner)), slog.String("holder", h.fence.Holder), logattr.Duration("lag", lag))
}

//go:noinline
func (s *Scheduler) logFinished(ctx context.Context, h *hold, f cron.Fire, n int, o *ledger.Outcome, took time.Duration) {
	if !s.log.Enabled(ctx, slog.LevelInfo) { // the attributes cost allocations (took)
		return
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "job_run_finished", slog.String("job", h.u.job.Name), slog.String("partition", h.u.partition),
		slog.Time("slot", f.At), slog.Int("attempt", n), slog.String("status", string(o.Status)),
		logattr.Duration("took", took), slog.String("class", string(o.Class)), slog.String("error", o.Error))
}

// outcome is how an attempt of slot that returned runErr is recorded: it
// gathers what decideOutcome reads (the error's text, masked, and class;
// for a deferral, whether the job's deferrals allow it, from the ledger)
// and lets it decide.
func (s *Scheduler) outcome(h hold, slot ledger.Slot, runErr error, timedOut, replaced bool, left int) ledger.Outcome {
	if runErr == nil {
		return decideOutcome(ended{}, s.clock.Now(), nil)
	}
	job := h.u.job
	// The one place a job's error becomes text: masked (the attempt's
	// owner, then Options.Redact) before the ledger stores it and the log
	// shows it.
	e := ended{failed: true, text: s.cfg.Redact(maskOwner(runErr.Error(), h.fence.Owner)), class: classify(h.ctx(), s.life.run, runErr, timedOut),
		replaced: replaced, left: left}
	if e.class == ledger.ClassDeferred && !replaced {
		e.deferFor, e.deferOK = s.deferral(h, slot, runErr)
	}
	// The backoff is drawn only when a retry is decided: the jitter's
	// random stream stays as it was (Options.Jitter makes it repeatable).
	backoff := func() time.Duration { return s.retryDelay(job, job.MaxAttempts-left) }
	return decideOutcome(e, s.clock.Now(), backoff)
}

// ended is how an attempt ended, with what deciding its outcome reads,
// gathered beforehand.
type ended struct {
	failed   bool              // the job function returned an error
	text     string            // its error's text, masked (Options.Redact)
	class    ledger.ErrorClass // its class (classify)
	replaced bool              // a newer slot replaced the run (OverlapCancelOther)
	left     int               // attempts left in the slot's budget
	deferFor time.Duration     // a deferral's wait, at most maxDeferral
	deferOK  bool              // the job's deferrals allow this one (deferral)
}

// decideOutcome is the outcome of an attempt that ended as e, at now:
// succeeded; or failed, with its next attempt's time when it is deferred
// (not counted against the budget) or retried (backoff, drawn only then,
// is the wait), or none when it is final (permanent, replaced, the budget
// spent). Retry times are whole milliseconds, rounded up: every store
// keeps them exactly, so no claim reads a retry time earlier than the one
// decided here. A pure function of (e, now), table-tested.
func decideOutcome(e ended, now time.Time, backoff func() time.Duration) ledger.Outcome {
	if !e.failed {
		return ledger.Outcome{Status: ledger.StatusSucceeded}
	}
	o := ledger.Outcome{Status: ledger.StatusFailed, Error: e.text, Class: e.class}
	if o.Class == ledger.ClassDeferred && !e.replaced {
		if e.deferOK {
			o.RetryAt = now.Add(e.deferFor).Truncate(time.Millisecond).Add(time.Millisecond)
			return o
		}
		o.Class = ledger.ClassRetryable // deferred too often in a row: counted
	}
	switch {
	case e.replaced:
		// OverlapCancelOther: a newer slot replaced this run; it is not
		// retried.
		o.Class, o.Error = ledger.ClassInterrupted, errReplaced.Error()+": "+e.text
	case o.Class != ledger.ClassPermanent && e.left > 0:
		// The budget, not the attempt number, decides: an operator's
		// Request gives an exhausted slot MaxAttempts more attempts, with
		// the backoff starting again from RetryBackoff.
		o.RetryAt = now.Add(backoff()).Truncate(time.Millisecond).Add(time.Millisecond)
	}
	return o
}

// deferral returns how long the attempt of slot that failed with runErr,
// classified ClassDeferred, waits before the next: its RetryAfter, at
// most maxDeferral. ok is false when the job's deferrals are off or
// its last MaxDeferrals attempts were all deferred (read from the ledger,
// so the bound holds across replicas and restarts; a ledger that cannot
// be read counts the attempt, which is the bounded choice).
func (s *Scheduler) deferral(h hold, slot ledger.Slot, runErr error) (time.Duration, bool) {
	job := h.u.job
	var d deferral
	if job.MaxDeferrals < 0 || !errors.As(runErr, &d) {
		return 0, false
	}
	rec, found, err := s.cfg.Ledger.Get(h.ctx(), slot)
	if err != nil || !found {
		return 0, false
	}
	inRow := 0
	for i := len(rec.Attempts) - 1; i >= 0; i-- {
		a := rec.Attempts[i]
		if a.Status == ledger.StatusRunning {
			continue // this attempt
		}
		if a.Class != ledger.ClassDeferred {
			break
		}
		inRow++
	}
	if inRow >= job.MaxDeferrals {
		return 0, false
	}
	return min(d.RetryAfter(), maxDeferral), true
}

// afterTimeout cancels with errTimeout once d passed on the scheduler's
// clock (never for d == 0); stop ends the wait.
func (s *Scheduler) afterTimeout(d time.Duration, cancel context.CancelCauseFunc) (stop func()) {
	if d <= 0 {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	t := s.clock.NewTimer(d)
	go func() {
		defer close(done)
		defer t.Stop()
		select {
		case <-t.C():
			cancel(errTimeout)
		case <-quit:
		}
	}()
	return func() { close(quit); <-done }
}

var errTimeout = errors.New("scheduler: run timed out (Job.Timeout)")

// errShutdown is the cause of a run canceled because Stop's grace period
// ran out.
var errShutdown = fmt.Errorf("%w: shut down past the grace period", ErrInterrupted)

// classify is the one place that decides how a failed attempt is
// recorded: a panic, Permanent, a timeout, an interruption (the lease
// ended, or shutdown past the grace period), a deferral (the error is a
// deferral with a RetryAfter above 0: come back later, not counted), else
// retryable. An error matching fence.ErrScopeMismatch (pgfence.ErrScopeMismatch:
// the sink fences what the job writes under another lease) is permanent as
// if wrapped by Permanent: every attempt would present the same scope and be
// refused alike.
func classify(leaseCtx, lifeCtx context.Context, err error, timedOut bool) ledger.ErrorClass {
	var (
		p *panicError
		d deferral
	)
	switch {
	case errors.As(err, &p):
		return ledger.ClassPanic
	case errors.Is(err, ErrPermanent), errors.Is(err, fence.ErrScopeMismatch):
		return ledger.ClassPermanent
	case timedOut:
		return ledger.ClassTimeout
	case leaseCtx.Err() != nil, lifeCtx.Err() != nil:
		return ledger.ClassInterrupted
	case errors.As(err, &d) && d.RetryAfter() > 0:
		return ledger.ClassDeferred
	}
	return ledger.ClassRetryable
}

// retryDelay is RetryBackoff * 2^(attempt-1), capped at RetryMaxBackoff,
// with ±20% jitter from Options.Jitter (internal/retry): a pure function of
// the attempt number, so a restart recomputes it from the ledger.
func (s *Scheduler) retryDelay(job *registered, attempt int) time.Duration {
	return retry.Delay(attempt, job.RetryBackoff, job.RetryMaxBackoff, 0.2, 0.2, s.jitter)
}

// jitter draws from Options.Jitter, which is not safe for concurrent use.
func (s *Scheduler) jitter(n int64) int64 {
	s.randMu.Lock()
	defer s.randMu.Unlock()
	return s.rand.Int64N(n)
}

// heartbeat records the attempt alive every LeaseTTL/3 (every second at
// most, under OverlapCancelOther, so a replacement is noticed quickly)
// until the returned function is called, which waits for a heartbeat
// under way. Under OverlapCancelOther a heartbeat that finds a cancel
// request cancels the run with errReplaced. After ctx ends it records
// none.
//
// It starts no goroutine: a timer of the scheduler's clock (AfterFunc)
// runs each heartbeat and is armed again after it, for the next one a
// period (LeaseTTL/3) after the last one began (at once when that has
// passed, as a ticker would). Most runs end before their first
// heartbeat, so most cost a timer and no goroutine, channel or stack.
func (s *Scheduler) heartbeat(ctx context.Context, slot ledger.Slot, f ledger.Fence, attempt int, job *registered, replace context.CancelCauseFunc) (stop func()) {
	every := job.LeaseTTL / 3
	if job.Overlap == OverlapCancelOther {
		every = min(every, time.Second)
	}
	b := &beater{s: s, ctx: ctx, slot: slot, f: f, attempt: attempt, job: job, replace: replace, every: every, began: s.clock.Now()}
	// Under b.mu: the timer may fire before AfterFunc returns (a short
	// period, a fake clock advanced meanwhile), and fire takes b.mu
	// before it reads b.tick or takes the timer out of s.beats.
	b.mu.Lock()
	b.tick = s.clock.AfterFunc(every, b.fire)
	s.beat(b.tick, true)
	b.mu.Unlock()
	return b.stop
}

// beater is the heartbeat of one attempt (heartbeat).
type beater struct {
	s       *Scheduler
	ctx     context.Context
	slot    ledger.Slot
	f       ledger.Fence
	attempt int
	job     *registered
	replace context.CancelCauseFunc
	every   time.Duration
	began   time.Time // when the attempt began, on the scheduler's clock
	tick    clock.Timer

	mu      sync.Mutex
	stopped bool
	firing  sync.WaitGroup // the heartbeat under way
}

// overtaken reports whether a slot of the job's schedule, later than the
// attempt's, came due while the attempt ran (after it began, at or before
// now): the only attempt a cancel request replaces. The ledger's request
// names the latest replacing slot and stays (ledger.Canceler), so without
// this an attempt begun after it (a catch-up step planned before that slot
// came due, a Retry or Backfill of an older slot) would be cancelled too,
// although no slot came due during its run.
func (b *beater) overtaken(now time.Time) bool {
	from := b.began
	if b.slot.At.After(from) {
		from = b.slot.At
	}
	next, ok := b.job.window.next(from)
	return ok && !next.At.After(now)
}

// fire records one heartbeat and arms the timer for the next; it runs on
// the timer's goroutine.
func (b *beater) fire() {
	b.mu.Lock()
	if b.stopped {
		b.mu.Unlock()
		return
	}
	b.firing.Add(1)
	b.mu.Unlock()
	defer b.firing.Done()
	s := b.s
	if b.ctx.Err() != nil {
		s.beat(b.tick, false) // no more: not at work, not asleep
		return
	}
	// At work (quiet) from here to the answer's handling: the timer is
	// not armed meanwhile, and is armed again before the count drops.
	s.active.Add(1)
	defer s.active.Add(-1)
	fired := s.clock.Now()
	err := s.cfg.Ledger.Heartbeat(b.ctx, b.slot, b.f, b.attempt, fired)
	switch {
	case errors.Is(err, ledger.ErrCancelRequested):
		if b.job.Overlap == OverlapCancelOther && b.overtaken(fired) {
			s.log.LogAttrs(b.ctx, slog.LevelInfo, "job_run_replaced", slog.String("job", b.slot.Job),
				slog.String("partition", b.slot.Partition), slog.Time("slot", b.slot.At))
			b.replace(errReplaced)
		}
	case err != nil && b.ctx.Err() == nil:
		s.ledgerRefused(b.ctx, b.slot, opHeartbeat, err)
	}
	// The next one every after this one's start, as with a ticker; the
	// wall clock's steps are bounded out (0 to every).
	took := min(max(s.clock.Now().Sub(fired), 0), b.every)
	b.mu.Lock()
	if !b.stopped {
		b.tick.Reset(b.every - took)
	}
	b.mu.Unlock()
}

// stop ends the heartbeats and waits for the one under way.
func (b *beater) stop() {
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
	b.tick.Stop()
	b.firing.Wait()
	b.s.beat(b.tick, false)
}

// beat adds the timer of a heartbeat to s.beats (on), or takes it out.
// Only quiet reads them, with a fake clock (s.trackBeats): with any other
// it does nothing.
func (s *Scheduler) beat(t clock.Timer, on bool) {
	if !s.trackBeats {
		return
	}
	s.beatMu.Lock()
	defer s.beatMu.Unlock()
	if !on {
		delete(s.beats, t)
		return
	}
	if s.beats == nil {
		s.beats = map[clock.Timer]struct{}{}
	}
	s.beats[t] = struct{}{}
}

type panicError struct{ v any }

func (p *panicError) Error() string { return fmt.Sprintf("scheduler: job panicked: %v", p.v) }

// runJob calls fn, turning a panic into an error: one bad job must not take
// the scheduler down.
func runJob(ctx context.Context, fn func(context.Context, Run) error, run Run) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{v: r}
		}
	}()
	return fn(ctx, run)
}

// ledgerRefused logs (and counts) a ledger write that did not go through;
// step is an Op constant.
func (s *Scheduler) ledgerRefused(ctx context.Context, slot ledger.Slot, step string, err error) {
	attrs := []slog.Attr{slog.String("job", slot.Job), slog.String("partition", slot.Partition),
		slog.Time("slot", slot.At), slog.String("step", step), slog.Any("error", err)}
	switch {
	case errors.Is(err, ledger.ErrSlotDone):
		s.log.LogAttrs(ctx, slog.LevelDebug, "job_claim_skipped", append(attrs, slog.String("reason", "done"))...)
	case errors.Is(err, fence.ErrStaleToken):
		s.obs.StaleRejected(slot.Job)
		traceEvent(ctx, eventStale, slot, attribute.String("holdfast.step", step))
		s.log.LogAttrs(ctx, slog.LevelWarn, "stale_token_rejected", attrs...)
	default:
		if !errors.Is(err, context.Canceled) {
			s.obs.LedgerError(slot.Job, step)
		}
		s.log.LogAttrs(ctx, slog.LevelError, "ledger_error", attrs...)
	}
}

// release releases l, a lease this scheduler took. A store that gives no
// answer (a Redis that just restarted refuses connections for a moment:
// go-redis keeps a failed dial's error for up to a second) leaves the
// lease in place, and every replica's claim of its unit or slot finds it
// held until its TTL ends (30 s by default): slots came due and ran
// nowhere (chaos scenario redis-data-loss, on a busy host). So a release
// without an answer is tried again in the background, with a jittered
// backoff from 20 ms up to 500 ms, until the backend answers, the lease's
// TTL has passed since the first try (the key expired on its own) or the
// scheduler stops past its grace period.
func (s *Scheduler) release(l *lease.Lease) {
	run := s.life.run // the retries end with this lifetime's runs, not a later one's
	ctx := context.WithoutCancel(run)
	if releaseAnswered(l.Release(ctx)) {
		return
	}
	deadline := s.clock.Now().Add(l.TTL())
	s.wg.Go(func() {
		for attempt := 1; ; attempt++ {
			wait := retry.Delay(attempt, releaseRetryBase, releaseRetryMax, 0.5, 0, s.jitter)
			if !s.clock.Now().Add(wait).Before(deadline) {
				return
			}
			timer := s.clock.NewTimer(wait)
			select {
			case <-timer.C():
			case <-run.Done():
				timer.Stop()
				return
			}
			if releaseAnswered(l.Release(ctx)) {
				return
			}
		}
	})
}

// The backoff of release's retries.
const (
	releaseRetryBase = 20 * time.Millisecond
	releaseRetryMax  = 500 * time.Millisecond
)

// releaseAnswered reports whether a Release that returned err is over: the
// backend answered (released, or the key was no longer ours).
func releaseAnswered(err error) bool {
	return err == nil || errors.Is(err, lease.ErrNotHeld) || errors.Is(err, lease.ErrNilContext)
}

// finishRelease records outcome o of attempt n of slot under h and
// releases h's lease, in one step of the joined ledger. When the lease was
// released before (shutdown past the grace period released it), only the
// outcome is recorded. It returns the ledger's error.
func (s *Scheduler) finishRelease(ctx context.Context, h hold, slot ledger.Slot, n int, o ledger.Outcome) error {
	var ferr error
	ran := false
	err := leasejoin.Release(ctx, h.l, func(ctx context.Context, held leasedriver.Held) error {
		ran = true
		var rerr error
		ferr, rerr = s.joiner.FinishRelease(ctx, leasejoin.Backend(s.cfg.Leases), held, slot, h.fence, n, o, s.clock.Now())
		return rerr
	})
	if !ran {
		return s.cfg.Ledger.Finish(ctx, slot, h.fence, n, o, s.clock.Now())
	}
	if ferr == nil && err != nil && !errors.Is(err, lease.ErrNotHeld) {
		// No answer from the one script: the outcome may not be recorded.
		ferr = err
	}
	return ferr
}

// dueAfter reports whether u's schedule has a slot after fire due by now.
func (s *Scheduler) dueAfter(u *unit, fire cron.Fire) bool {
	next, ok := u.job.window.next(fire.At)
	return ok && !next.At.After(s.clock.Now())
}

// maskOwner replaces owner in text, a job's error, with its owner id
// (fence.OwnerID): the owner is a write capability, and a job that formats
// its Run or Holder into an error (fmt's %v of the struct, or Owner
// itself) would otherwise hand it to the ledger, the logs and every
// operator view.
func maskOwner(text, owner string) string {
	if owner == "" || !strings.Contains(text, owner) {
		return text
	}
	return strings.ReplaceAll(text, owner, "owner_id:"+fence.OwnerID(owner))
}
