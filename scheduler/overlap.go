package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler/cron"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// The two overlap policies that need more than the planner: OverlapAllow
// runs each slot under a lease of its own, OverlapCancelOther asks the
// running attempt to stop. OverlapForbid and OverlapBufferOne are pure
// planning (overlapSteps in plan.go).

// startSlot, under OverlapAllow, takes the lease of slot f alone, begins
// its attempt (fenced per slot) while planner still holds the (job,
// partition) lease, so the next planner sees it begun, then runs it on a
// goroutine of its own, at once: runs of OverlapAllow are not bounded by
// the claim pool (as Kubernetes' Allow), so an attempt is never begun and
// left waiting. A slot whose lease is held is running elsewhere: nothing
// to do, once the ledger shows it begun.
//
// A slot whose lease is held but which the ledger does not show begun has
// a holder that stalled between its lease and its Begin (a process frozen
// there, a Begin slow to arrive): startSlot then returns an error that
// does not settle the slot (errSlotLeaseUnbegun), so that the claim stops
// before beginning a later slot, which would move the ledger's last begun
// slot past this one and hide it from every later plan (a lost slot, seen
// by the chaos scenario scheduler-mix), and claims again a second later:
// by then the stalled holder began the slot, or its lease ran out and the
// slot is caught up. Later slots wait for it, at most the lease's TTL.
//
// The attempt is begun with the planner's fence as Fence.Planner, so that
// a planner that lost the job lease can no longer skip slots once this one
// began any; the run's later writes carry the slot's fence alone.
// The error (logged) is the lease's or Begin's when the run did not start.
// open is the step's (step.open), passed to run.
func (s *Scheduler) startSlot(planner hold, f cron.Fire, open bool) error {
	u := planner.u
	l, err := s.cfg.Leases.TryAcquire(s.leaseCtx(), ledger.SlotScope(planner.slot(f.At)), u.job.LeaseTTL)
	if errors.Is(err, lease.ErrNotAcquired) {
		err = s.slotHeld(planner, f, err)
	}
	if err != nil {
		reason, level := "error", slog.LevelWarn
		switch {
		case errors.Is(err, lease.ErrNotAcquired):
			reason, level = "slot_running", slog.LevelDebug
		case errors.Is(err, errSlotLeaseUnbegun):
			reason, level = "slot_lease_held_unbegun", slog.LevelInfo
		case !errors.Is(err, context.Canceled):
			s.obs.LedgerError(u.job.Name, opClaim)
		}
		s.log.LogAttrs(s.life.claim, level, "job_claim_skipped", slog.String("job", u.job.Name),
			slog.String("partition", u.partition), slog.Time("slot", f.At), slog.String("reason", reason), slog.Any("error", err))
		return err
	}
	h := s.newHold(u, l) // scoped by the slot lease's name
	h.tctx = trace.ContextWithSpan(l.Context(), trace.SpanFromContext(planner.ctx()))
	beginFen := h.fence
	beginFen.Planner = &planner.fence
	n, left, err := s.begin(h, beginFen, f)
	if err != nil {
		s.release(l)
		return err
	}
	s.active.Add(1)
	s.wg.Go(func() {
		defer s.active.Add(-1)
		defer s.release(l)
		s.run(h, f, n, left, false, open)
	})
	return nil
}

// errSlotLeaseUnbegun: an OverlapAllow slot's lease is held, and the
// ledger does not show the slot begun (startSlot).
var errSlotLeaseUnbegun = errors.New("scheduler: the slot's lease is held but the slot is not begun")

// slotHeld answers an OverlapAllow slot whose lease another owner holds
// (held, a *lease.NotAcquiredError): held itself when the ledger shows the
// slot begun (running elsewhere: settled), errSlotLeaseUnbegun when it
// does not, or the ledger's error.
func (s *Scheduler) slotHeld(planner hold, f cron.Fire, held error) error {
	_, found, err := s.cfg.Ledger.Get(s.life.claim, planner.slot(f.At))
	switch {
	case err != nil:
		return err
	case found:
		return held
	}
	// held is not wrapped: a lease not acquired settles a slot.
	return fmt.Errorf("%w (slot %s; %v)", errSlotLeaseUnbegun, f.At.UTC().Format(time.RFC3339), held)
}

// replaceHolder, under OverlapCancelOther, asks the holder of u's lease to
// cancel its run (through the ledger, seen at its next heartbeat) and
// waits for the lease, at most LeaseTTL + 1 s on the scheduler's clock (a
// dead holder's lease expires by then). It stops waiting, with the lease
// not acquired, once the ledger has a record of fire's slot (begun, most
// often: this replica lost the race for it, and the holder runs that very
// slot, which no cancel request touches): the holder answers for it, and
// this claim would otherwise hold u busy past the next fire, which it
// would only note.
func (s *Scheduler) replaceHolder(u *unit, fire cron.Fire) (*lease.Lease, error) {
	if err := s.requestReplace(u, fire); err != nil {
		return nil, err
	}
	// Poll rather than lease.Client.Acquire, whose wait is not on the
	// scheduler's clock.
	deadline := s.clock.Now().Add(u.job.LeaseTTL + time.Second)
	for {
		l, err := s.cfg.Leases.TryAcquire(s.leaseCtx(), u.lease, u.job.LeaseTTL)
		var held *lease.NotAcquiredError
		if !errors.As(err, &held) || s.clock.Now().After(deadline) || s.recorded(u, fire.At) {
			return l, err
		}
		wait := min(max(held.RemainingTTL, 10*time.Millisecond), 100*time.Millisecond)
		s.waiting.Add(1)
		slept := clock.Sleep(s.clock, wait, s.life.claim.Done())
		s.waiting.Add(-1)
		if !slept {
			return nil, s.life.claim.Err()
		}
	}
}

// requestReplace asks, under OverlapCancelOther, that the running attempt
// of u's slots before fire's stop: the ledger's cancel request, which its
// holder, on this replica or another, sees at its next heartbeat.
func (s *Scheduler) requestReplace(u *unit, fire cron.Fire) error {
	c, ok := s.cfg.Ledger.(ledger.Canceler)
	if !ok {
		return fmt.Errorf("%w: the ledger cannot cancel runs", ErrInvalidJob)
	}
	if err := c.RequestCancel(s.life.claim, u.job.Name, u.partition, fire.At); err != nil {
		return err
	}
	s.log.LogAttrs(s.life.claim, slog.LevelInfo, "job_replace_requested", slog.String("job", u.job.Name),
		slog.String("partition", u.partition), slotAttr(fire.At))
	return nil
}
