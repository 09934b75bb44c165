package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler/cron"
)

// step is one thing a claim does for a slot: run it, or record it skipped
// or missed.
type step struct {
	fire   cron.Fire
	skip   Status // "" to run
	reason string
}

// claim tries to take u's lease. The replica that gets it works, in order
// and under that one lease, through everything due for u: open slots
// (failed with their retry time passed, abandoned, requested), slots nobody
// began since the last one the ledger saw (missed-slot policy for those due
// before the claim began, overlap policy for those due during its runs),
// and the fire itself.
// Other replicas skip: the holder does their slot too.
//
// prev is the schedule's fire before fire when known (zero otherwise): with
// it, a ledger that implements ClearBeginner begins fire in the round trip
// that reads its state, when nothing else is due.
func (s *Scheduler) claim(claimCtx, runCtx context.Context, u *unit, fire cron.Fire, prev time.Time, scheduled bool) {
	seen := s.noteSeen(u, fire, scheduled)
	l, err := s.cfg.Leases.TryAcquire(runCtx, u.lease, u.job.LeaseTTL, lease.WithLifetime(runCtx))
	if errors.Is(err, lease.ErrNotAcquired) && scheduled && u.job.Overlap == OverlapCancelOther {
		l, err = s.replaceHolder(claimCtx, runCtx, u, fire)
	}
	if err != nil {
		s.claimSkipped(claimCtx, u, fire, err)
		return
	}
	s.claimHeld(claimCtx, runCtx, u, fire, prev, scheduled, seen, l, nil)
}

// noteSeen records that a claim of fire starts and returns the latest fire
// whose claim started before it: a never-begun slot at or before that one
// was missed. Fires between it and this one were deferred while the unit
// was busy: they are due, not missed.
func (s *Scheduler) noteSeen(u *unit, fire cron.Fire, scheduled bool) (seen time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen = u.seen
	if scheduled && fire.At.After(u.seen) {
		u.seen = fire.At
	}
	return seen
}

// claimSkipped logs (and counts) a claim that did not get the lease.
func (s *Scheduler) claimSkipped(ctx context.Context, u *unit, fire cron.Fire, err error) {
	reason, level := "error", slog.LevelWarn
	if errors.Is(err, lease.ErrNotAcquired) {
		reason, level = "lease_held", slog.LevelDebug
		s.obs.ClaimConflict(u.job.Name)
	}
	s.log.LogAttrs(ctx, level, "job_claim_skipped", slog.String("job", u.job.Name),
		slog.String("partition", u.partition), slotAttr(fire.At), slog.String("reason", reason), slog.Any("error", err))
}

// claimHeld is the claim's work once it holds u's lease l, which it
// releases. pre, when not nil, is the answer of a ClearBeginner to the
// fire's fast request, made by the caller.
func (s *Scheduler) claimHeld(claimCtx, runCtx context.Context, u *unit, fire cron.Fire, prev time.Time, scheduled bool, seen time.Time, l *lease.Lease, pre *BeginResult) {
	job := u.job
	defer func() { _ = l.Release(context.WithoutCancel(runCtx)) }()
	f := Fence{Token: l.Token(), Owner: l.Owner()}
	cs := claimState{handled: map[time.Time]bool{}, seen: seen}
	if cs.seen.IsZero() { // a claim outside the dispatcher
		cs.seen = time.Now()
	}
	if scheduled && (pre != nil || claimCtx.Err() == nil) {
		if pre == nil {
			if req, ok := s.fastRequest(u, f, fire, prev, time.Now()); ok {
				res := s.cfg.Ledger.(ClearBeginner).BeginIfClear(l.Context(), []BeginRequest{req}, time.Now())[0]
				pre = &res
			}
		}
		if pre != nil && !s.afterFastBegin(l, u, f, fire, *pre, &cs) {
			return
		}
	}
	for claimCtx.Err() == nil && l.Err() == nil {
		steps, retryAt, err := s.plan(l.Context(), u, fire, scheduled, &cs)
		if err != nil {
			s.log.LogAttrs(claimCtx, slog.LevelWarn, "job_claim_skipped", slog.String("job", job.Name),
				slog.String("partition", u.partition), slotAttr(fire.At), slog.String("reason", "ledger_error"), slog.Any("error", err))
			return
		}
		if !retryAt.IsZero() {
			s.wakeAt(u, retryAt)
		}
		if len(steps) == 0 {
			return
		}
		for _, st := range steps {
			if claimCtx.Err() != nil || l.Err() != nil {
				return
			}
			cs.handled[st.fire.At] = true
			if st.skip != "" {
				s.skip(l, u, f, st)
				continue
			}
			if job.Overlap == OverlapAllow {
				s.startSlot(claimCtx, runCtx, u, f, st.fire)
				continue
			}
			started := time.Now()
			if s.attempt(l, u, f, st.fire) {
				if cs.runFrom.IsZero() {
					cs.runFrom = started
				}
				cs.runTo = time.Now()
			}
		}
		if job.Overlap == OverlapAllow {
			return // its runs go on under their own leases
		}
		// Plan again only when a slot of the schedule came due meanwhile:
		// retries and operator requests arrive as wake-ups of their own.
		// This saves a ledger round trip per slot in the common case.
		latest := steps[len(steps)-1].fire.At
		if scheduled && fire.At.After(latest) {
			latest = fire.At
		}
		if next, ok := s.next(job, latest); !ok || next.At.After(time.Now()) {
			return
		}
	}
}

// fastRequest returns the ClearBeginner request of a scheduled fire whose
// claim holds lease fence f, or false when the claim must plan: the ledger
// has no fast path, the job runs OverlapAllow, no earlier fire is known,
// or a later slot is due too.
func (s *Scheduler) fastRequest(u *unit, f Fence, fire cron.Fire, prev, now time.Time) (BeginRequest, bool) {
	job := u.job
	if _, ok := s.cfg.Ledger.(ClearBeginner); !ok || job.Overlap == OverlapAllow {
		return BeginRequest{}, false
	}
	if prev.IsZero() {
		if prev = prevFire(job, fire.At); prev.IsZero() {
			return BeginRequest{}, false
		}
	}
	if next, ok := s.next(job, fire.At); ok && !next.At.After(now) {
		return BeginRequest{}, false
	}
	since := now.Add(-job.CatchUpWindow)
	if job.StartAt.After(since) {
		since = job.StartAt
	}
	return BeginRequest{
		Slot: Slot{Job: job.Name, At: fire.At, Partition: u.partition}, Fence: f,
		MaxAttempts: job.MaxAttempts, Prev: prev, Since: since,
	}, true
}

// afterFastBegin runs the slot a ClearBeginner began. It reports whether
// the claim must go on and plan: the ledger saw something else due, or a
// slot came due during the run.
func (s *Scheduler) afterFastBegin(l *lease.Lease, u *unit, f Fence, fire cron.Fire, res BeginResult, cs *claimState) (plan bool) {
	slot := Slot{Job: u.job.Name, At: fire.At, Partition: u.partition}
	switch {
	case !res.Clear:
		return true
	case res.Err != nil:
		s.ledgerRefused(l.Context(), slot, "begin", res.Err)
		return false
	}
	cs.handled[fire.At] = true
	cs.runFrom = time.Now()
	s.run(l, u, f, fire, res.Attempt, res.Left)
	cs.runTo = time.Now()
	next, ok := s.next(u.job, fire.At)
	return ok && !next.At.After(time.Now())
}

// noFire stands for "no earlier fire" in prevFire.
var noFire = time.Unix(0, 0).UTC()

// prevFire returns job's latest fire before at (noFire when the job has
// none, from StartAt on), looking back twice the gap from at to the next
// fire: enough for any evenly spaced schedule. It returns zero (unknown:
// the claim plans with State) when that finds none on an uneven one.
func prevFire(job *registered, at time.Time) time.Time {
	next, ok := job.schedule.Next(at)
	if !ok {
		return time.Time{}
	}
	from := at.Add(-2 * next.At.Sub(at))
	bounded := !job.StartAt.IsZero() && !from.After(job.StartAt)
	if bounded {
		from = job.StartAt.Add(-time.Second) // Between excludes from
	}
	const most = 1 << 10
	fires := job.schedule.Between(from, at.Add(-time.Second), most)
	switch {
	case len(fires) == most:
		return time.Time{} // the window holds more: its last fire is unknown
	case len(fires) > 0:
		return fires[len(fires)-1].At
	case bounded:
		return noFire
	}
	return time.Time{}
}

// claimState is what one claim carries from one plan to the next.
type claimState struct {
	// handled holds the slots this claim ran or skipped.
	handled map[time.Time]bool
	// seen is the latest slot whose timer had fired before the claim
	// began: a never-begun slot at or before it was missed.
	seen time.Time
	// runFrom and runTo span this claim's attempts (zero before the
	// first): a slot that came due within it overlapped a run.
	runFrom, runTo time.Time
}

// plan reads the ledger and lists what is due now, oldest first, leaving
// out slots already handled by this claim. retryAt is the earliest retry
// still to come (zero if none).
func (s *Scheduler) plan(ctx context.Context, u *unit, fire cron.Fire, scheduled bool, cs *claimState) (steps []step, retryAt time.Time, err error) {
	job := u.job
	now := time.Now()
	since := now.Add(-job.CatchUpWindow)
	if job.StartAt.After(since) {
		since = job.StartAt
	}
	st, err := s.cfg.Ledger.State(ctx, job.Name, u.partition, since)
	if err != nil {
		return nil, time.Time{}, err
	}
	if st.Paused {
		s.log.LogAttrs(ctx, slog.LevelInfo, "job_claim_skipped", slog.String("job", job.Name),
			slog.String("partition", u.partition), slotAttr(fire.At), slog.String("reason", "paused"))
		return nil, time.Time{}, nil
	}
	if st.Horizon.After(since) {
		since = st.Horizon.Truncate(time.Second)
	}
	// The first step listed for a slot wins: an open slot (requested,
	// abandoned, failed) is run even when it is also a gap slot, and a
	// slot waiting for its retry time is not begun early by a late timer.
	byAt := map[time.Time]step{}
	waiting := map[time.Time]bool{}
	add := func(s step) {
		at := s.fire.At
		if _, dup := byAt[at]; dup || waiting[at] || cs.handled[at] || at.After(now) ||
			(!job.EndAt.IsZero() && !at.Before(job.EndAt)) {
			return
		}
		byAt[at] = s
	}
	for _, o := range st.Open {
		if o.RetryAt.After(now) {
			waiting[o.At] = true
			if retryAt.IsZero() || o.RetryAt.Before(retryAt) {
				retryAt = o.RetryAt
			}
			continue
		}
		add(step{fire: s.fireAt(job, o.At)})
	}
	// Gap detection: slots after the last one the ledger saw that nobody
	// began. Those whose timer fired before this claim began were missed
	// (missed-slot policy); those that came due during one of this
	// claim's runs overlapped it (overlap policy); the others came due
	// while the claim was between runs and are simply due. A job the
	// ledger never saw starts at this fire: no backfill of the time before
	// it existed.
	if !st.Last.IsZero() {
		from := st.Last
		if from.Before(since) {
			from = since.Add(-time.Second)
		}
		var missed, overlapped []cron.Fire
		for _, g := range job.schedule.Between(from, now, 1<<16) {
			if !job.EndAt.IsZero() && !g.At.Before(job.EndAt) {
				break // the job has no slots from EndAt on
			}
			switch {
			case cs.handled[g.At] || (scheduled && g.At.Equal(fire.At)):
			case !g.At.After(cs.seen):
				missed = append(missed, g)
			case !cs.runFrom.IsZero() && g.At.After(cs.runFrom) && !g.At.After(cs.runTo):
				overlapped = append(overlapped, g)
			default:
				add(step{fire: g})
			}
		}
		for _, stp := range missedSteps(job, missed) {
			add(stp)
		}
		for i, g := range overlapped {
			if job.Overlap != OverlapForbid && i == len(overlapped)-1 {
				add(step{fire: g})
				continue
			}
			add(step{fire: g, skip: StatusSkipped, reason: "overlap"})
		}
	}
	if scheduled {
		add(step{fire: fire})
	}
	for _, stp := range byAt {
		steps = append(steps, stp)
	}
	slices.SortFunc(steps, func(a, b step) int { return a.fire.At.Compare(b.fire.At) })
	return steps, retryAt, nil
}

// missedSteps applies the missed-slot policy to slots nobody began.
func missedSteps(job *registered, missed []cron.Fire) []step {
	steps := make([]step, 0, len(missed))
	run := len(missed) // the first index to run
	switch job.Missed {
	case MissedCatchUp:
		run = max(len(missed)-job.MaxCatchUp, 0)
	case MissedLatestOnly:
		run = max(len(missed)-1, 0)
	}
	for i, g := range missed {
		switch {
		case i >= run:
			steps = append(steps, step{fire: g})
		case job.Missed == MissedManual:
			steps = append(steps, step{fire: g, skip: StatusMissed, reason: "missed: awaits an operator"})
		default:
			steps = append(steps, step{fire: g, skip: StatusSkipped, reason: "missed"})
		}
	}
	return steps
}

// fireAt rebuilds the Fire of a slot instant read back from the ledger.
func (s *Scheduler) fireAt(job *registered, at time.Time) cron.Fire {
	if f, ok := job.schedule.Next(at.Add(-time.Second)); ok && f.At.Equal(at) {
		return f
	}
	local := at.In(job.schedule.Zone())
	return cron.Fire{At: at, Local: local, BusinessDate: local.Format(time.DateOnly)}
}

func (s *Scheduler) skip(l *lease.Lease, u *unit, f Fence, st step) {
	slot := Slot{Job: u.job.Name, At: st.fire.At, Partition: u.partition}
	if err := s.cfg.Ledger.Skip(l.Context(), slot, f, st.skip, st.reason, time.Now()); err != nil {
		s.ledgerRefused(l.Context(), slot, "skip", err)
		return
	}
	s.obs.SlotSkipped(u.job.Name, st.skip)
	s.log.LogAttrs(l.Context(), slog.LevelInfo, "slot_skipped", slog.String("job", slot.Job),
		slog.String("partition", slot.Partition), slog.Time("slot", slot.At),
		slog.String("status", string(st.skip)), slog.String("reason", st.reason))
}

// attempt runs one attempt of slot f under lease l, fenced in the ledger.
// It reports whether the job function ran.
func (s *Scheduler) attempt(l *lease.Lease, u *unit, fen Fence, f cron.Fire) (ran bool) {
	n, left, ok := s.begin(l, u, fen, f)
	if ok {
		s.run(l, u, fen, f, n, left)
	}
	return ok
}

// begin starts the next attempt of slot f in the ledger; ok is false when
// there is none to make (done, stale, ledger error: logged).
func (s *Scheduler) begin(l *lease.Lease, u *unit, fen Fence, f cron.Fire) (n, left int, ok bool) {
	slot := Slot{Job: u.job.Name, At: f.At, Partition: u.partition}
	n, left, err := s.cfg.Ledger.Begin(l.Context(), slot, fen, u.job.MaxAttempts, time.Now())
	if err != nil {
		s.ledgerRefused(l.Context(), slot, "begin", err)
		return 0, 0, false
	}
	return n, left, true
}

// run runs attempt n of slot f, begun under lease l, and records how it
// ended.
func (s *Scheduler) run(l *lease.Lease, u *unit, fen Fence, f cron.Fire, n, left int) {
	job := u.job
	ctx := l.Context()
	slot := Slot{Job: job.Name, At: f.At, Partition: u.partition}
	run := Run{
		Slot: slot, Local: f.Local, Zone: job.schedule.Zone().String(), BusinessDate: f.BusinessDate, Rule: f.Rule,
		Attempt: n, Token: fen.Token, Owner: fen.Owner, IdempotencyKey: slot.Key(),
	}
	lag := time.Since(f.At)
	s.obs.RunStarted(job.Name, lag)
	s.log.LogAttrs(ctx, slog.LevelInfo, "job_claimed", slog.String("job", job.Name), slog.String("partition", u.partition),
		slog.Time("slot", f.At), slog.Int("attempt", n), slog.Uint64("token", uint64(fen.Token)), slog.Duration("lag", lag))

	runCtx, replace := context.WithCancelCause(ctx)
	cancel := context.CancelFunc(func() {})
	if job.Timeout > 0 {
		runCtx, cancel = context.WithTimeoutCause(runCtx, job.Timeout, errTimeout)
	}
	stopBeat := s.heartbeat(runCtx, slot, fen, n, job, replace)
	started := time.Now()
	runErr := runJob(runCtx, job.Run, run)
	stopBeat()
	timedOut := errors.Is(context.Cause(runCtx), errTimeout)
	replaced := errors.Is(context.Cause(runCtx), ErrReplaced)
	cancel()
	replace(nil)

	o := Outcome{Status: StatusSucceeded}
	if runErr != nil {
		o = Outcome{Status: StatusFailed, Error: runErr.Error(), Class: classify(ctx, runErr, timedOut)}
		if replaced {
			// OverlapCancelOther: a newer slot replaced this run; it is
			// not retried.
			o.Class, o.Error = ClassInterrupted, ErrReplaced.Error()+": "+runErr.Error()
		} else if o.Class != ClassPermanent && left > 0 {
			// The budget, not the attempt number, decides: an operator's
			// Request gives an exhausted slot MaxAttempts more attempts, with
			// the backoff starting again from RetryBackoff.
			// Whole milliseconds, rounded up: every store keeps them exactly, so
			// no claim reads a retry time earlier than the one decided here.
			o.RetryAt = time.Now().Add(retryDelay(job, job.MaxAttempts-left)).Truncate(time.Millisecond).Add(time.Millisecond)
		}
	}
	took := time.Since(started)
	// The ledger write must go through even though ctx may have ended: the
	// fence, not the context, decides whether it is still ours to make.
	if err := s.cfg.Ledger.Finish(context.WithoutCancel(ctx), slot, fen, n, o, time.Now()); err != nil {
		s.ledgerRefused(ctx, slot, "finish", err)
		return
	}
	s.obs.RunCompleted(job.Name, o.Status, took, time.Now())
	if !o.RetryAt.IsZero() {
		s.wakeAt(u, o.RetryAt)
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "job_run_finished", slog.String("job", job.Name), slog.String("partition", u.partition),
		slog.Time("slot", f.At), slog.Int("attempt", n), slog.String("status", string(o.Status)),
		slog.Duration("took", took), slog.String("class", string(o.Class)), slog.String("error", o.Error))
}

// startSlot, under OverlapAllow, takes the lease of slot f alone, begins
// its attempt (fenced per slot) while the caller still holds the (job,
// partition) lease, so the next planner sees it begun, then runs it on a
// goroutine of its own, at once: runs of OverlapAllow are not bounded by
// the claim pool (as Kubernetes' Allow), so an attempt is never begun and
// left waiting. A slot whose lease is held is running elsewhere: nothing
// to do.
//
// The attempt is begun with the planner's fence as Fence.Unit too, so
// that a planner that lost the job lease can no longer skip slots once
// this one began any; the run's later writes carry the slot's fence alone.
func (s *Scheduler) startSlot(claimCtx, runCtx context.Context, u *unit, planner Fence, f cron.Fire) {
	l, err := s.cfg.Leases.TryAcquire(runCtx, slotLeaseName(u.lease, f.At), u.job.LeaseTTL, lease.WithLifetime(runCtx))
	if err != nil {
		reason, level := "error", slog.LevelWarn
		if errors.Is(err, lease.ErrNotAcquired) {
			reason, level = "slot_running", slog.LevelDebug
		}
		s.log.LogAttrs(claimCtx, level, "job_claim_skipped", slog.String("job", u.job.Name),
			slog.String("partition", u.partition), slog.Time("slot", f.At), slog.String("reason", reason), slog.Any("error", err))
		return
	}
	fen := Fence{Token: l.Token(), Owner: l.Owner(), PerSlot: true}
	beginFen := fen
	beginFen.Unit = &planner
	n, left, ok := s.begin(l, u, beginFen, f)
	if !ok {
		_ = l.Release(context.WithoutCancel(runCtx))
		return
	}
	s.wg.Go(func() {
		defer func() { _ = l.Release(context.WithoutCancel(runCtx)) }()
		s.run(l, u, fen, f, n, left)
	})
}

var errTimeout = errors.New("scheduler: run timed out (Job.Timeout)")

// classify is the one place that decides how a failed attempt is recorded.
func classify(leaseCtx context.Context, err error, timedOut bool) ErrorClass {
	var p *panicError
	switch {
	case errors.As(err, &p):
		return ClassPanic
	case IsPermanent(err):
		return ClassPermanent
	case timedOut:
		return ClassTimeout
	case leaseCtx.Err() != nil:
		return ClassInterrupted
	}
	return ClassRetryable
}

// retryDelay is RetryBackoff * 2^(attempt-1), capped, with ±20% jitter.
func retryDelay(job *registered, attempt int) time.Duration {
	d := job.RetryBackoff
	for i := 1; i < attempt && d < job.RetryMaxBackoff; i++ {
		d *= 2
	}
	d = min(d, job.RetryMaxBackoff)
	jitter := time.Duration(rand.Int64N(int64(d)/5+1)) * 2
	return d - d/5 + jitter
}

// heartbeat records the attempt alive every LeaseTTL/3 (every second at
// most, under OverlapCancelOther, so a replacement is noticed quickly)
// until the returned function is called, which waits for it. Under
// OverlapCancelOther a heartbeat that finds a cancel request cancels the
// run with ErrReplaced.
func (s *Scheduler) heartbeat(ctx context.Context, slot Slot, f Fence, attempt int, job *registered, replace context.CancelCauseFunc) (stop func()) {
	every := job.LeaseTTL / 3
	if job.Overlap == OverlapCancelOther {
		every = min(every, time.Second)
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				err := s.cfg.Ledger.Heartbeat(ctx, slot, f, attempt, time.Now())
				switch {
				case errors.Is(err, ErrCancelRequested):
					if job.Overlap == OverlapCancelOther {
						s.log.LogAttrs(ctx, slog.LevelInfo, "job_run_replaced", slog.String("job", slot.Job),
							slog.String("partition", slot.Partition), slog.Time("slot", slot.At))
						replace(ErrReplaced)
					}
				case err != nil && ctx.Err() == nil:
					s.ledgerRefused(ctx, slot, "heartbeat", err)
				}
			}
		}
	}()
	return func() { close(quit); <-done }
}

type panicError struct{ v any }

func (p *panicError) Error() string { return fmt.Sprintf("scheduler: job panicked: %v", p.v) }

// runJob calls fn, turning a panic into an error: one bad job must not take
// the scheduler down.
func runJob(ctx context.Context, fn JobFunc, run Run) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &panicError{v: r}
		}
	}()
	return fn(ctx, run)
}

func (s *Scheduler) ledgerRefused(ctx context.Context, slot Slot, step string, err error) {
	attrs := []slog.Attr{slog.String("job", slot.Job), slog.String("partition", slot.Partition),
		slog.Time("slot", slot.At), slog.String("step", step), slog.Any("error", err)}
	switch {
	case errors.Is(err, ErrSlotDone):
		s.log.LogAttrs(ctx, slog.LevelDebug, "job_claim_skipped", append(attrs, slog.String("reason", "done"))...)
	case errors.Is(err, fence.ErrStaleToken):
		s.obs.StaleRejected(slot.Job)
		s.log.LogAttrs(ctx, slog.LevelWarn, "stale_token_rejected", attrs...)
	default:
		s.log.LogAttrs(ctx, slog.LevelError, "ledger_error", attrs...)
	}
}

// replaceHolder, under OverlapCancelOther, asks the holder of u's lease to
// cancel its run (through the ledger, seen at its next heartbeat) and
// waits for the lease, at most LeaseTTL (a dead holder's lease expires
// by then).
func (s *Scheduler) replaceHolder(claimCtx, runCtx context.Context, u *unit, fire cron.Fire) (*lease.Lease, error) {
	c, ok := s.cfg.Ledger.(Canceler)
	if !ok {
		return nil, fmt.Errorf("%w: the ledger cannot cancel runs", ErrInvalidJob)
	}
	if err := c.RequestCancel(claimCtx, u.job.Name, u.partition, fire.At); err != nil {
		return nil, err
	}
	s.log.LogAttrs(claimCtx, slog.LevelInfo, "job_replace_requested", slog.String("job", u.job.Name),
		slog.String("partition", u.partition), slotAttr(fire.At))
	// Poll with TryAcquire, bounded by deadline and claimCtx; the lease
	// lives for the run (runCtx is its lifetime), not the wait.
	deadline := time.Now().Add(u.job.LeaseTTL + time.Second)
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		l, err := s.cfg.Leases.TryAcquire(runCtx, u.lease, u.job.LeaseTTL, lease.WithLifetime(runCtx))
		var held *lease.NotAcquiredError
		if !errors.As(err, &held) || time.Now().After(deadline) {
			return l, err
		}
		timer.Reset(min(max(held.RemainingTTL, 10*time.Millisecond), 100*time.Millisecond))
		select {
		case <-claimCtx.Done():
			return nil, claimCtx.Err()
		case <-timer.C:
		}
	}
}

// slotAttr is the slot attribute of a log event: none for a claim that
// has no slot of its own (a wake-up, the recovery claim at Start), which
// slog handlers leave out.
func slotAttr(at time.Time) slog.Attr {
	if at.IsZero() {
		return slog.Attr{}
	}
	return slog.Time("slot", at)
}
