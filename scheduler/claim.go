package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler/cron"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// claim tries to take u's lease. The replica that gets it works, in order
// and under that one lease, through everything due for u (see plan.go).
// Other replicas skip: the holder does their slot too. p is the claim's
// place in the pool. A d not nil is the claim's end, left to the caller
// (claimHeld's d).
func (s *Scheduler) claim(u *unit, req claimReq, p *place) (d *later) {
	if req.followUp && s.recorded(u, req.fire.At) {
		return nil
	}
	seen := s.noteSeen(u, req)
	if req.recovery && !s.recoveryNeeded(u, seen) {
		return nil
	}
	l, err := s.cfg.Leases.TryAcquire(s.leaseCtx(), u.lease, u.job.LeaseTTL)
	if errors.Is(err, lease.ErrNotAcquired) && req.scheduled() && u.job.Overlap == OverlapCancelOther {
		l, err = s.replaceHolder(u, req.fire)
	}
	if err != nil {
		s.claimSkipped(u, req, err)
		return nil
	}
	h := s.newHold(u, l)
	h.place = p
	return s.claimHeld(h, req, seen, nil)
}

// recoveryNeeded reads u's State without its lease and reports whether
// the recovery claim at Start has anything to do (recoveryDue). A read
// error answers true: the claim goes on and reads again under the lease.
func (s *Scheduler) recoveryNeeded(u *unit, seen time.Time) bool {
	now := s.clock.Now()
	st, err := s.cfg.Ledger.State(s.life.claim, u.job.Name, u.partition, u.job.window.since(now), now)
	if err != nil {
		return true
	}
	st, _ = s.readState(s.life.claim, u, st, now)
	return s.recoveryDue(u, st, seen, now)
}

// recoveryDue reports whether the recovery claim of u, whose State st was
// read without the lease at now, has anything to do: the planner, given
// what the claim would give it (seen, the latest fire whose claim had
// started), lists a slot to run or record (an open slot whose retry time
// passed, an abandoned attempt, a pending request, a slot missed while no
// replica ran) or slots left unrecorded. A retry still to come is queued
// as a wake-up at its time, as the claim would queue it. A paused job, or
// one with nothing due, is left to its next fire. Taking the lease costs
// two Redis scripts per unit, and most units, at a restart, have nothing
// to recover. A unit whose State changes after the read is no different
// from one that changes after a claim: its next fire, wake-up or request
// claims it.
func (s *Scheduler) recoveryDue(u *unit, st ledger.State, seen, now time.Time) bool {
	p := planClaim(u.job, st, newClaimState(seen), cron.Fire{}, now)
	if len(p.steps) > 0 || p.unrecorded > 0 {
		return true
	}
	if !p.retryAt.IsZero() {
		s.wakeAt(u, p.retryAt)
	}
	return false
}

// recoverAll is the recovery at Start over a ledger.StatesReader: it reads
// the State of units in batches of ledger.StatesBatch, one call each,
// and queues a claim now for each unit with something to recover
// (recoveryDue). A batch whose read failed gets a recovery claim per
// unit, which reads again on its own.
func (s *Scheduler) recoverAll(sr ledger.StatesReader, units []*unit) {
	for chunk := range slices.Chunk(units, ledger.StatesBatch) {
		if s.life.claim.Err() != nil {
			return
		}
		now := s.clock.Now()
		reqs := make([]ledger.StateRequest, len(chunk))
		for i, u := range chunk {
			reqs[i] = ledger.StateRequest{Job: u.job.Name, Partition: u.partition, Since: u.job.window.since(now)}
		}
		sts, err := sr.States(s.life.claim, reqs, now)
		if s.life.claim.Err() != nil {
			return // stopped: no claim follows
		}
		if err == nil && len(sts) != len(chunk) {
			err = fmt.Errorf("scheduler: %d states for %d requests", len(sts), len(chunk))
		}
		for i, u := range chunk {
			switch {
			case err != nil:
				s.wakeFor(u, now, claimReq{recovery: true})
			default:
				st, _ := s.readState(s.life.claim, u, sts[i], now)
				if s.recoveryDue(u, st, s.noteSeen(u, claimReq{}), now) {
					s.wakeAt(u, now)
				}
			}
		}
	}
}

// wakeRetry is how long a claim that did not get the lease waits before
// it claims again (1 s), when it must (claimSkipped).
const wakeRetry = time.Second

// heldRetry is how long a wake-up's claim (a retry time, an operator's
// request, the recovery at Start) that found the lease held for the n-th
// time in a row waits before it claims again: wakeRetry, doubled at each
// try, up to the holder's remaining TTL (err's) plus wakeRetry, and never
// more than maxHeldRetry. A holder that crashed is seen soon after its
// lease ran out, a run of hours is not polled every second (the recovery
// of a replica started during such a run was, for the whole run, once the
// ledger listed running slots whatever their age), and what the wake-up
// was for runs at most maxHeldRetry after the holder let go.
func heldRetry(n int, err error) time.Duration {
	ceil := wakeRetry
	var held *lease.NotAcquiredError
	if errors.As(err, &held) {
		ceil += held.RemainingTTL
	}
	return min(wakeRetry<<min(max(n-1, 0), 16), ceil, maxHeldRetry)
}

// maxHeldRetry bounds heldRetry (10 s).
const maxHeldRetry = 10 * time.Second

// noteSeen records that a claim of req starts and returns the latest fire
// whose claim started before it: a never-begun slot at or before that one
// was missed.
func (s *Scheduler) noteSeen(u *unit, req claimReq) (seen time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen = u.seen.time()
	if req.fire.At.After(seen) {
		u.seen = instantOf(req.fire.At)
	}
	return seen
}

// claimSkipped logs a claim of u that did not get the lease (event
// job_claim_skipped) and asks for another claim wakeRetry later when
// nobody else works for u: after a slow grant (lease.ErrSlowAcquire: the
// grant came too late to be trusted and was undone), a Redis error, or a
// wake-up that found the lease held (its holder planned before the
// wake-up's cause, a retry time or an operator's request, and will not
// plan again unless a slot comes due). A scheduled fire that found the
// lease held is left to its holder, or to the next fire's claim; when its
// claim's retry after an error finds it held, that holder may not exist,
// and a follow-up looks again (followUp). The retry claims
// the same fire (retryClaim), so a slot whose claims are refused again and
// again is never silently lost: once a claim gets through, the slot runs,
// or, planned over lateAfter late, is run or recorded by the missed-slot
// policy (plan.go); every refusal is logged at Warn with reason slow_grant
// or error.
func (s *Scheduler) claimSkipped(u *unit, req claimReq, err error) {
	reason, level := "error", slog.LevelWarn
	switch {
	case errors.Is(err, lease.ErrNotAcquired):
		reason, level = "lease_held", slog.LevelDebug
		s.obs.ClaimConflict(u.job.Name)
		if req.scheduled() && !req.afterError {
			s.noteSure(u, req.fire.At, false) // its holder answers for it
		}
	case errors.Is(err, lease.ErrSlowAcquire):
		reason = "slow_grant"
		s.noteDoubt(u, req.fire.At)
	case !errors.Is(err, context.Canceled):
		s.obs.LedgerError(u.job.Name, opClaim)
		s.noteDoubt(u, req.fire.At)
	}
	s.log.LogAttrs(s.life.claim, level, "job_claim_skipped", slog.String("job", u.job.Name),
		slog.String("partition", u.partition), slotAttr(req.fire.At), slog.String("reason", reason), slog.Any("error", err))
	switch {
	case !errors.Is(err, lease.ErrNotAcquired):
		req.afterError = true
		s.retryClaim(u, req, s.clock.Now().Add(wakeRetry))
	case !req.scheduled():
		req.held++
		s.retryClaim(u, req, s.clock.Now().Add(heldRetry(req.held, err)))
	case req.afterError:
		s.followUp(u, req, err)
	}
}

// followUp makes sure that a scheduled fire is planned by someone when
// the retry of its failed claim (req.afterError) found u's lease held
// (err). The failed try may have taken the lease on the server all the
// same: its reply lost to a timeout (Redis paused), the acquirer never
// learned of its grant, and nobody renews the lease or plans under it.
// Every other replica's claim that found it held left the slot to that
// holder, and so may the next fire's claims (the last fires before EndAt
// have none, a daily job's comes a day later). So a follow-up claim of
// the fire is queued for when the lease has run out (its remaining TTL,
// else LeaseTTL, plus wakeRetry): it reads the slot's record (one ledger
// read) and claims only when there is none, and, finding the lease held
// again, follows up again. Only after an error: a claim that just found
// the lease held leaves the slot to its holder. Without it the chaos
// scenario scheduler-mix lost the two last slots of its window to a
// Redis pause.
func (s *Scheduler) followUp(u *unit, req claimReq, err error) {
	wait := u.job.LeaseTTL
	var held *lease.NotAcquiredError
	if errors.As(err, &held) && held.RemainingTTL > 0 {
		wait = held.RemainingTTL
	}
	req.followUp = true
	s.retryClaim(u, req, s.clock.Now().Add(wait+wakeRetry))
}

// recorded reports whether the ledger has a record of u's slot at at (a
// read error counts as none: the claim goes on and plans).
func (s *Scheduler) recorded(u *unit, at time.Time) bool {
	_, found, err := s.cfg.Ledger.Get(s.life.claim, ledger.Slot{Job: u.job.Name, At: at, Partition: u.partition})
	return err == nil && found
}

// claimHeld is the claim's work once it holds h's lease, which it
// releases: plan (plan.go), carry the steps out, and plan again while
// slots came due meanwhile. pre, when not nil, is the answer of a
// ClearBeginner to the fire's fast request, made by the caller. A d not
// nil is a run's record that waits for the batch claims under way (run):
// the claim's end, its span and its lease included, is then the caller's:
// unitFrom hands it to the claimGate, or ends the claim at once
// (endClaim) when the gate refuses it.
func (s *Scheduler) claimHeld(h hold, req claimReq, seen time.Time, pre *ledger.BeginResult) (d *later) {
	l := h.l
	h, endSpan := s.traceClaim(h, req)
	defer func() {
		if d != nil {
			d.endSpan = endSpan
			return
		}
		endSpan()
		s.release(l)
	}()
	if seen.IsZero() { // a claim outside the dispatcher
		seen = s.clock.Now()
	}
	cs := newClaimState(seen)
	if req.scheduled() && (pre != nil || s.life.claim.Err() == nil) {
		if pre == nil {
			if r, ok := s.fastRequest(h.u, req, s.clock.Now()); ok {
				r.Fence = h.fence
				res := s.cfg.Ledger.(ledger.ClearBeginner).BeginIfClear(h.ctx(), []ledger.BeginRequest{r}, s.clock.Now())[0]
				pre = &res
			}
		}
		if pre != nil {
			plan, d := s.afterFastBegin(h, req.fire, *pre, cs)
			if !plan {
				return d
			}
		}
	}
	s.planLoop(h, req, cs)
	return nil
}

// planLoop is claimHeld's planning: read the unit's state, plan, carry the
// steps out, again while slots came due meanwhile. It is a function of its
// own so that its locals (the state, the plan) are not in the frame of
// claimHeld, under which every run of a fast begin goes on: the smaller
// the frames under a run, the less stack the runtime grows for it.
func (s *Scheduler) planLoop(h hold, req claimReq, cs *claimState) {
	for s.holding(h) {
		now := s.clock.Now()
		st, err := s.cfg.Ledger.State(h.ctx(), h.u.job.Name, h.u.partition, h.u.job.window.since(now), now)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				s.obs.LedgerError(h.u.job.Name, opState)
			}
			s.log.LogAttrs(s.life.claim, slog.LevelWarn, "job_claim_skipped", slog.String("job", h.u.job.Name),
				slog.String("partition", h.u.partition), slotAttr(req.fire.At), slog.String("reason", "ledger_error"), slog.Any("error", err))
			// The fire is not forgotten: a wake-up plans again, from
			// the ledger's last slot (or a reset's gap, reset.go).
			s.noteDoubt(h.u, req.fire.At)
			s.retryClaim(h.u, claimReq{}, s.clock.Now().Add(wakeRetry))
			return
		}
		pruned := st.Pruned
		st, gap := s.readState(h.ctx(), h.u, st, now)
		cs.lostTo, cs.prunedTo = time.Time{}, time.Time{}
		if !gap.IsZero() {
			cs.prunedTo = pruned
			if st.Last.Before(gap) {
				cs.lostTo = gap // st.Last is the reset's lostFrom
			}
		}
		p := planClaim(h.u.job, st, cs, req.fire, now)
		cs.broken = false
		again := s.carryOut(h, req, p, cs)
		if !cs.broken && !p.paused {
			s.planDone(h.u, gap)
		}
		if !again {
			return
		}
	}
}

// holding reports whether a claim under h may go on: claiming has not
// stopped and the lease is held.
func (s *Scheduler) holding(h hold) bool {
	return s.life.claim.Err() == nil && h.l.Err() == nil
}

// carryOut does p's steps under h and reports whether the claim must plan
// again: a slot of the schedule came due meanwhile. Retries and operator
// requests arrive as wake-ups of their own, which saves a ledger round
// trip per slot in the common case.
func (s *Scheduler) carryOut(h hold, req claimReq, p plan, cs *claimState) (again bool) {
	job := h.u.job
	switch {
	case p.paused:
		s.log.LogAttrs(h.ctx(), slog.LevelInfo, "job_claim_skipped", slog.String("job", job.Name),
			slog.String("partition", h.u.partition), slotAttr(req.fire.At), slog.String("reason", "paused"))
		return false
	case p.unrecorded > 0:
		s.log.LogAttrs(h.ctx(), slog.LevelWarn, "slots_unrecorded", slog.String("job", job.Name),
			slog.String("partition", h.u.partition), slog.Time("from", p.first), slog.Time("to", p.last),
			slog.Int("count", p.unrecorded), slog.String("reason", "missed: older than CatchUpWindow, beyond the recorded gap"))
	}
	if !p.retryAt.IsZero() {
		s.wakeAt(h.u, p.retryAt)
	}
	if len(p.steps) == 0 {
		return false
	}
	for _, st := range p.steps {
		if !s.holding(h) {
			cs.broken = true
			return false
		}
		cs.handled[st.fire.At] = true
		var err error
		switch {
		case st.skip != "":
			err = s.skip(h, st)
		case job.Overlap == OverlapAllow:
			err = s.startSlot(h, st.fire, st.open)
		default:
			started := s.clock.Now()
			var ran bool
			if ran, err = s.attempt(h, st.fire, st.open); ran {
				if cs.runFrom.IsZero() {
					cs.runFrom = started
				}
				cs.runTo = s.clock.Now()
			}
		}
		if !settled(err) {
			// The slot is untouched: stop before a later slot is begun
			// (which would hide this one from every later plan) and
			// claim again soon; by then the slot is late and follows
			// the missed-slot policy.
			cs.broken = true
			s.noteDoubt(h.u, st.fire.At)
			s.wakeAt(h.u, s.clock.Now().Add(wakeRetry))
			return false
		}
		s.noteSure(h.u, st.fire.At, !errors.Is(err, fence.ErrStaleToken) && !errors.Is(err, lease.ErrNotAcquired))
	}
	if job.Overlap == OverlapAllow {
		return false // its runs go on under their own leases
	}
	latest := p.steps[len(p.steps)-1].fire.At
	if req.fire.At.After(latest) {
		latest = req.fire.At
	}
	next, ok := job.window.next(latest)
	return ok && !next.At.After(s.clock.Now())
}

// fastRequest returns the ClearBeginner request of the scheduled fire of
// req for u, its Fence left to the caller (the unit lease's), or false
// when the claim must plan: the ledger has no fast path, the job runs
// OverlapAllow, no earlier fire is known, a later slot is due too, or the
// fire is late and the job's missed-slot policy does not run it.
//
// A late fire (planned past lateAfter) is missed, and under MissedCatchUp
// and MissedLatestOnly the planner runs a lone missed slot that is the
// claim's own fire: when the ledger finds the unit clear (nothing open,
// pending, waiting for a retry or paused, no slot unbegun between the
// last one and the fire before this one), planning would begin it and
// nothing else, so the fast path begins it too. Under MissedSkip and
// MissedManual the planner records it, so the claim plans.
func (s *Scheduler) fastRequest(u *unit, req claimReq, now time.Time) (ledger.BeginRequest, bool) {
	job := u.job
	if _, ok := s.cfg.Ledger.(ledger.ClearBeginner); !ok || job.Overlap == OverlapAllow {
		return ledger.BeginRequest{}, false
	}
	doubt, recorded := s.inDoubt(u)
	if doubt {
		return ledger.BeginRequest{}, false
	}
	late := now.Sub(req.fire.At) > job.window.lateAfter(req.fire.At)
	if late && job.Missed != MissedCatchUp && job.Missed != MissedLatestOnly {
		return ledger.BeginRequest{}, false
	}
	prev := req.prev
	if prev.IsZero() {
		if prev = job.window.prev(req.fire.At); prev.IsZero() {
			return ledger.BeginRequest{}, false
		}
	}
	if next, ok := job.window.next(req.fire.At); ok && !next.At.After(now) {
		return ledger.BeginRequest{}, false
	}
	return ledger.BeginRequest{
		Slot:        ledger.Slot{Job: job.Name, At: req.fire.At, Partition: u.partition},
		Fence:       ledger.Fence{Holder: s.cfg.Holder}, // the lease's fence is set once taken
		MaxAttempts: job.MaxAttempts, Prev: prev, Since: job.window.since(now), Seen: recorded,
	}, true
}

// afterFastBegin runs the slot a ClearBeginner began. It reports whether
// the claim must go on and plan: the ledger saw something else due, or a
// slot came due during the run; d is the run's record when it waits
// (run).
func (s *Scheduler) afterFastBegin(h hold, fire cron.Fire, res ledger.BeginResult, cs *claimState) (plan bool, d *later) {
	switch {
	case !res.Clear:
		return true, nil
	case res.Err != nil:
		s.ledgerRefused(h.ctx(), h.slot(fire.At), opBegin, res.Err)
		if !settled(res.Err) {
			// Not begun: plan it again soon (reset.go).
			s.noteDoubt(h.u, fire.At)
			s.retryClaim(h.u, claimReq{}, s.clock.Now().Add(wakeRetry))
			return false, nil
		}
		s.noteSure(h.u, fire.At, !errors.Is(res.Err, fence.ErrStaleToken))
		return false, nil
	}
	s.noteSure(h.u, fire.At, true)
	cs.handled[fire.At] = true
	cs.runFrom = s.clock.Now()
	released, d := s.run(h, fire, res.Attempt, res.Left, true, false) // the claim's own fire, clear of open slots
	if d != nil {
		return false, d
	}
	cs.runTo = s.clock.Now()
	return !released && s.dueAfter(h.u, fire), nil
}
