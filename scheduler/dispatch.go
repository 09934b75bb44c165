package scheduler

import (
	"container/heap"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/internal/logattr"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// The dispatcher is the one timer goroutine of a Scheduler. It keeps one
// scheduled entry per (job, partition), its next fire, and wake-ups (a
// retry's time, an operator's request); it sleeps until the earliest, at
// most maxSleep, and hands the due claims to the bounded pool.
//
// Time is read from Options.Clock, and the wall clock is not trusted to
// move evenly:
//   - Backward step: when the wall clock reads earlier than at the last
//     wake-up, every unit's next fire is computed again from the current
//     reading (a fire queued for 17:01 after the clock went back to 15:00
//     would otherwise stall the unit for two hours).
//   - Forward jump, or a process that could not run (SIGSTOP, VM suspend):
//     the wall clock moved more than the timer slept. A unit whose queued
//     fire and later ones all came due claims once, for the latest due
//     fire; the slots before it that nobody began were missed (unit.seen
//     moves to now, as at Start), and the job's missed-slot policy decides
//     them (plan.go).
//
// Every sleep is capped at maxSleep, so a step is noticed within that
// bound, or within one tick of a per-second job, whichever comes first.

// maxSleep caps one sleep of the dispatcher (1 s).
const maxSleep = time.Second

// dispatch is the dispatcher loop; it returns when claiming stops.
func (s *Scheduler) dispatch() {
	timer := s.clock.NewTimer(maxSleep)
	defer timer.Stop()
	var slept parkedAt // the last sleep: from at (wall), for wait (elapsed)
	for {
		s.mu.Lock()
		s.woken = false
		now := s.clock.Now()
		if !slept.at.IsZero() {
			s.noticeSteps(slept, now)
		}
		due := s.popDue(now)
		s.mu.Unlock()
		s.triggerAll(due)
		s.mu.Lock()
		// The sleep is measured from now, not from the reading before
		// triggerAll: the clock may have moved meanwhile (a fake one by a
		// whole step), and a head that came due then must not wait for a
		// timer set a step too far.
		now = s.clock.Now()
		wait := maxSleep
		if s.queue.Len() > 0 {
			wait = max(min(s.queue[0].at.Sub(now), maxSleep), 0)
		}
		slept = parkedAt{at: now, wait: wait, timer: timer}
		timer.Reset(wait)
		s.parked = slept
		s.mu.Unlock()
		select {
		case <-s.life.claim.Done():
			return
		case <-s.wake:
		case <-timer.C():
		}
		s.mu.Lock()
		s.parked = parkedAt{}
		s.mu.Unlock()
	}
}

// wallSince is how far the wall clock moved from from to now. Round(0)
// strips the monotonic readings time.Now carries: Sub would otherwise
// measure elapsed time, and a step would never show.
func wallSince(from, now time.Time) time.Duration { return now.Round(0).Sub(from.Round(0)) }

// stepTolerance is how much longer than it slept the wall clock may have
// moved before the dispatcher counts the difference as time it could not
// act (500 ms: well above timer and scheduling delays).
const stepTolerance = 500 * time.Millisecond

// noticeSteps compares the wall clock's move since the last sleep began
// with the elapsed time the timer measured; s.mu is held. Back (now reads
// earlier than when the sleep began): every unit's next fire is computed
// again from now. Forward by more than the sleep (a jump, a freeze): the
// replica could not act until now, so slots up to now that nobody began
// are missed, as after a restart (unit.seen).
func (s *Scheduler) noticeSteps(slept parkedAt, now time.Time) {
	moved := wallSince(slept.at, now)
	switch {
	case moved < 0:
		s.log.LogAttrs(s.life.claim, slog.LevelWarn, "clock_stepped", logattr.Duration("by", moved))
		for _, u := range s.order {
			u.seen = instantOf(now)
			if u.queued != nil && u.queued.at.After(now) {
				s.schedule(u, now, time.Time{})
			}
		}
	case moved > slept.wait+stepTolerance:
		s.log.LogAttrs(s.life.claim, slog.LevelWarn, "clock_jumped", logattr.Duration("by", moved-slept.wait))
		for _, u := range s.order {
			u.seen = max(u.seen, instantOf(now))
		}
	}
}

// popDue removes the entries due at now and queues the next fire of each
// scheduled one. A scheduled entry whose next fire is due as well (the
// clock jumped, the process was frozen) becomes one claim for the latest
// due fire; s.mu is held.
func (s *Scheduler) popDue(now time.Time) []*entry {
	var due []*entry
	for s.queue.Len() > 0 && !s.queue[0].at.After(now) {
		e := heap.Pop(&s.queue).(*entry)
		if e.retry {
			e.u.retryQueued = false
		}
		if e.retry || !e.scheduled() {
			// A retry claims its fire again as it is: the unit's next
			// fire stays queued.
			due = append(due, e)
			continue
		}
		e.u.queued = nil
		if f, ok := e.u.job.window.latest(e.req.fire.At, now); ok {
			e.req = claimReq{fire: f} // the fire before it is unknown
			e.at = f.At
		}
		due = append(due, e)
		s.schedule(e.u, e.req.fire.At, e.req.fire.At)
	}
	return due
}

// maxClaimBatch bounds the leases one batch acquisition asks for.
const maxClaimBatch = 256

// triggerAll starts the claims of due entries. The scheduled fires of idle
// units, which come due together at a second's boundary, take their leases
// in batches (lease.Client.TryAcquireAll: one round trip per batch on a
// single Redis), each batch no larger than the free places in the pool, so
// a replica takes no more leases than it can run at once and the others
// get the rest. Wake-ups, retries of a refused claim and
// OverlapCancelOther fires claim one by one. A retry follows a claim whose
// grant came too late (undone) or failed: the claim markers its batch may
// have set (redisledger) would answer the unit held to a batch, which
// the retry must not be, or the slot would wait for the next fire.
func (s *Scheduler) triggerAll(due []*entry) {
	batches := map[time.Duration][]*entry{}
	for _, e := range due {
		if !e.scheduled() || e.retry || e.u.job.Overlap == OverlapCancelOther {
			s.trigger(e)
			continue
		}
		if s.markBusy(e) {
			ttl := e.u.job.LeaseTTL
			batches[ttl] = append(batches[ttl], e)
		}
	}
	for ttl, es := range batches {
		groups := s.claimGroups(es)
		s.wg.Go(func() { s.claimBatches(ttl, groups) })
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
		if e.scheduled() {
			u.pending = instantOf(e.req.fire.At)
			u.pendingAfterError = u.pendingAfterError || e.req.afterError
		}
		return false
	}
	u.busy = true
	s.active.Add(1)
	return true
}

// trigger starts a claim of e's unit, or, when one is running, leaves it a
// note to look again when it is done; under OverlapCancelOther a scheduled
// fire then also asks for the running attempt to be replaced: the claim
// under way may be this replica's own run of an earlier slot, which would
// otherwise run to its end.
func (s *Scheduler) trigger(e *entry) {
	if !s.markBusy(e) {
		if e.scheduled() && !e.retry && !e.req.afterError && e.u.job.Overlap == OverlapCancelOther {
			u, fire := e.u, e.req.fire // e is the dispatcher's
			s.active.Add(1)            // at work until the request is made
			s.wg.Go(func() {
				defer s.active.Add(-1)
				if err := s.requestReplace(u, fire); err != nil && s.life.claim.Err() == nil {
					s.obs.LedgerError(u.job.Name, opClaim)
					s.log.LogAttrs(s.life.claim, slog.LevelWarn, "job_replace_request_failed", slog.String("job", u.job.Name),
						slog.String("partition", u.partition), slotAttr(fire.At), slog.Any("error", err))
				}
			})
		}
		return
	}
	s.wg.Go(func() {
		select {
		case s.sem <- struct{}{}:
		case <-s.life.claim.Done():
			s.idle(e.u)
			return
		}
		s.unitLoop(e, nil, nil)
	})
}

// claimGroups cuts the fires of a batch into the groups claimBatches
// claims whole. With a joined ledger that marks claim groups
// (ledger.ClaimGroupMarker: redisledger), it orders them by (slot, lease
// name), the same order on every replica, cuts it into claim groups
// (ledger.ClaimGroupEnds) and shuffles the groups: every replica claims
// whole groups, in an order of its own, and one that reaches a group
// another replica claimed finds its marker and skips it for one read
// rather than try every unit. In one order, the replicas would try the
// same units at once and all but one would lose every try. Without
// markers, every fire is a group of its own, in the queue's order (on
// Cluster, before it had markers, the shuffled order measured a third
// more Redis CPU per slot).
func (s *Scheduler) claimGroups(es []*entry) [][]*entry {
	if !s.grouped {
		groups := make([][]*entry, len(es))
		for i := range es {
			groups[i] = es[i : i+1]
		}
		return groups
	}
	slices.SortFunc(es, func(a, b *entry) int {
		if c := a.req.fire.At.Compare(b.req.fire.At); c != 0 {
			return c
		}
		return strings.Compare(a.u.lease, b.u.lease)
	})
	var groups [][]*entry
	first := 0
	for i, e := range es {
		var next time.Time
		if i+1 < len(es) {
			next = es[i+1].req.fire.At
		}
		if ledger.ClaimGroupEnds(e.u.lease, e.req.fire.At, next) {
			groups = append(groups, es[first:i+1])
			first = i + 1
		}
	}
	for i := len(groups) - 1; i > 0; i-- {
		j := int(s.jitter(int64(i + 1)))
		groups[i], groups[j] = groups[j], groups[i]
	}
	return groups
}

// claimBatches claims the busy units of groups (claimGroups), whose
// leases share ttl: it takes places in the pool and tries whole groups
// in one batch, as many units as it took places when the groups allow
// (at least one group), acquiring no more leases than it took places (a
// joined ledger tells of the other units which ones are held, and leaves
// the free ones untried: they go first in the next batch), hands each
// lease won to a claim and gives the other places back, until every
// group is done or claiming stops. The outcomes of the runs that end
// their claims meanwhile wait for it (claimGate).
func (s *Scheduler) claimBatches(ttl time.Duration, groups [][]*entry) {
	defer s.claims.enter()()
	units := 0
	for _, g := range groups {
		units += len(g)
	}
	for len(groups) > 0 {
		k := s.takePlaces(min(units, maxClaimBatch))
		if k == 0 {
			for _, g := range groups {
				for _, e := range g {
					s.idle(e.u)
				}
			}
			return
		}
		var chunk []*entry
		for len(groups) > 0 && (len(chunk) == 0 || len(chunk)+len(groups[0]) <= k) {
			chunk = append(chunk, groups[0]...)
			groups = groups[1:]
		}
		units -= len(chunk)
		names := make([]string, len(chunk))
		for i, e := range chunk {
			names[i] = e.u.lease
		}
		leases, errs, pre := s.acquireAll(chunk, names, k, ttl)
		var untried, lost []int
		for i, e := range chunk {
			switch {
			case errs[i] == nil:
				k--
				h, p := s.newHold(e.u, leases[i]), pre[i]
				s.wg.Go(func() { s.unitLoop(e, &h, p) })
			case errors.Is(errs[i], leasedriver.ErrNotTried):
				untried = append(untried, i)
			default:
				lost = append(lost, i)
			}
		}
		for _, i := range lost {
			e := chunk[i]
			s.noteSeen(e.u, e.req)
			s.claimSkipped(e.u, e.req, errs[i])
			if next, ok := s.again(e.u); ok {
				s.runAgain(next, k > 0)
				k = max(k-1, 0)
			}
		}
		for ; k > 0; k-- {
			<-s.sem
		}
		if len(untried) > 0 {
			back := make([]*entry, 0, len(untried))
			for _, i := range untried {
				back = append(back, chunk[i])
			}
			groups = append([][]*entry{back}, groups...)
			units += len(back)
		}
	}
}

// runAgain runs a claim of next, which arrived for its unit while a claim
// of it was busy, in a place of the pool: the caller's (placed), or one it
// waits for.
func (s *Scheduler) runAgain(next *entry, placed bool) {
	s.wg.Go(func() {
		if !placed {
			select {
			case s.sem <- struct{}{}:
			case <-s.life.claim.Done():
				s.idle(next.u)
				return
			}
		}
		s.unitLoop(next, nil, nil)
	})
}

// takePlaces takes between 1 and n places in the pool: it waits for the
// first, then takes those that are free. 0 when claiming stops first.
func (s *Scheduler) takePlaces(n int) int {
	select {
	case s.sem <- struct{}{}:
	case <-s.life.claim.Done():
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
// arrived meanwhile, and marks the unit idle. The caller took a place in
// the pool, which unitLoop gives back (a run that ends its claim gives it
// back early, see place) and takes again for each claim after the first.
// held, when not nil, is the unit's lease, already acquired for e's fire,
// and pre the ledger's answer to its fast request (nil: none made).
func (s *Scheduler) unitLoop(e *entry, held *hold, pre *ledger.BeginResult) {
	s.unitFrom(&place{s: s, held: true}, e, held, pre)
}

// unitFrom is unitLoop in place p, which holds a place in the pool. A
// claim that ends with a record (later) while batch claims are under way
// leaves it to the claimGate, which ends the claim and goes on with the
// unit once they ended (finishLater), and unitFrom returns.
func (s *Scheduler) unitFrom(p *place, e *entry, held *hold, pre *ledger.BeginResult) {
	for {
		var d *later
		if held != nil {
			seen := s.noteSeen(e.u, e.req)
			h := *held
			h.place = p
			d = s.claimHeld(h, e.req, seen, pre)
			held = nil
		} else {
			d = s.claim(e.u, e.req, p)
		}
		if d != nil {
			if s.claims.hold(d) {
				return
			}
			s.endClaim(d)
		}
		next, ok := s.again(e.u)
		if !ok {
			p.giveBack()
			return
		}
		if !p.take() {
			s.idle(e.u)
			return
		}
		e = next
	}
}

// again returns what arrived for u while it was busy (a scheduled fire, or
// a wake-up), or marks u idle and returns false.
func (s *Scheduler) again(u *unit) (*entry, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.again || s.life.claim.Err() != nil {
		u.busy = false
		s.active.Add(-1)
		return nil, false
	}
	u.again = false
	e := &entry{u: u, req: claimReq{afterError: u.pendingAfterError}}
	if u.pending != 0 {
		e.req.fire = u.job.window.fireAt(u.pending.time())
	}
	u.pending, u.pendingAfterError = 0, false
	return e, true
}

// idle marks u idle.
func (s *Scheduler) idle(u *unit) {
	u.mu.Lock()
	u.busy = false
	s.active.Add(-1)
	u.mu.Unlock()
}
