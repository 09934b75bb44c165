package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

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
// to do.
//
// The attempt is begun with the planner's fence as Fence.Planner, so that
// a planner that lost the job lease can no longer skip slots once this one
// began any; the run's later writes carry the slot's fence alone.
// The error (logged) is the lease's or Begin's when the run did not start.
func (s *Scheduler) startSlot(planner hold, f cron.Fire) error {
	u := planner.u
	l, err := s.cfg.Leases.TryAcquire(s.leaseCtx(), ledger.SlotScope(planner.slot(f.At)), u.job.LeaseTTL)
	if err != nil {
		reason, level := "error", slog.LevelWarn
		switch {
		case errors.Is(err, lease.ErrNotAcquired):
			reason, level = "slot_running", slog.LevelDebug
		case !errors.Is(err, context.Canceled):
			s.obs.LedgerError(u.job.Name, OpClaim)
		}
		s.log.LogAttrs(s.life.claim, level, "job_claim_skipped", slog.String("job", u.job.Name),
			slog.String("partition", u.partition), slog.Time("slot", f.At), slog.String("reason", reason), slog.Any("error", err))
		return err
	}
	h := newHold(u, l) // scoped by the slot lease's name
	beginFen := h.fence
	beginFen.Planner = &planner.fence
	n, left, err := s.begin(h, beginFen, f)
	if err != nil {
		_ = l.Release(context.WithoutCancel(s.life.run))
		return err
	}
	s.active.Add(1)
	s.wg.Go(func() {
		defer s.active.Add(-1)
		defer func() { _ = l.Release(context.WithoutCancel(s.life.run)) }()
		s.run(h, f, n, left)
	})
	return nil
}

// replaceHolder, under OverlapCancelOther, asks the holder of u's lease to
// cancel its run (through the ledger, seen at its next heartbeat) and
// waits for the lease, at most LeaseTTL + 1 s on the scheduler's clock (a
// dead holder's lease expires by then).
func (s *Scheduler) replaceHolder(u *unit, fire cron.Fire) (*lease.Lease, error) {
	c, ok := s.cfg.Ledger.(ledger.Canceler)
	if !ok {
		return nil, fmt.Errorf("%w: the ledger cannot cancel runs", ErrInvalidJob)
	}
	if err := c.RequestCancel(s.life.claim, u.job.Name, u.partition, fire.At); err != nil {
		return nil, err
	}
	s.log.LogAttrs(s.life.claim, slog.LevelInfo, "job_replace_requested", slog.String("job", u.job.Name),
		slog.String("partition", u.partition), slotAttr(fire.At))
	// Poll rather than lease.Client.Acquire, whose wait is not on the
	// scheduler's clock.
	deadline := s.clock.Now().Add(u.job.LeaseTTL + time.Second)
	for {
		l, err := s.cfg.Leases.TryAcquire(s.leaseCtx(), u.lease, u.job.LeaseTTL)
		var held *lease.NotAcquiredError
		if !errors.As(err, &held) || s.clock.Now().After(deadline) {
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
