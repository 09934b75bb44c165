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
)

// claim tries to take job's lease for fire. The replica that gets it runs,
// in order and under that one lease, every slot that is due: the ones the
// ledger shows unfinished (failed, or running under a holder that lost its
// lease), the ones nobody began (gap detection from the last begun slot),
// and fire itself, within the job's catch-up window. The others skip: the
// holder will run this slot too.
//
// It returns the instant of its last look at the ledger (zero when it did not
// get the lease): every slot due by then was run or left to a later claim, so
// the caller's timer resumes strictly after it.
func (s *Scheduler) claim(claimCtx, runCtx context.Context, job *registered, fire cron.Fire) (checked time.Time) {
	l, err := s.cfg.Leases.TryAcquire(runCtx, job.Name, job.LeaseTTL)
	if err != nil {
		reason := "error"
		if errors.Is(err, lease.ErrNotAcquired) {
			reason = "lease_held"
		}
		s.log.LogAttrs(claimCtx, slog.LevelDebug, "job_claim_skipped",
			slog.String("job", job.Name), slog.Time("slot", fire.At), slog.String("reason", reason), slog.Any("error", err))
		return time.Time{}
	}
	defer func() { _ = l.Release(context.WithoutCancel(runCtx)) }()
	done := map[time.Time]bool{}
	// Runs as long as work is due and the lease is held; each pass asks
	// the ledger again, so slots that came due meanwhile are run too.
	for claimCtx.Err() == nil && l.Err() == nil {
		now := time.Now()
		due, err := s.due(l.Context(), job, fire, now)
		if err != nil {
			s.log.LogAttrs(claimCtx, slog.LevelWarn, "job_claim_skipped",
				slog.String("job", job.Name), slog.Time("slot", fire.At), slog.String("reason", "ledger_error"), slog.Any("error", err))
			return checked
		}
		checked = now
		due = slices.DeleteFunc(due, func(f cron.Fire) bool { return done[f.At] })
		if len(due) == 0 {
			return checked
		}
		for _, f := range due {
			if claimCtx.Err() != nil || l.Err() != nil {
				return checked
			}
			done[f.At] = true
			s.attempt(l, job, f)
		}
	}
	return checked
}

// due lists the slots to run now, oldest first: unfinished and never-begun
// slots in the catch-up window, up to MaxCatchUp of them, then every slot up
// to fire, and the slots that came due since.
func (s *Scheduler) due(ctx context.Context, job *registered, fire cron.Fire, now time.Time) ([]cron.Fire, error) {
	since := now.Add(-job.CatchUpWindow)
	if !job.StartAt.IsZero() && job.StartAt.After(since) {
		since = job.StartAt
	}
	open, last, err := s.cfg.Ledger.Outstanding(ctx, job.Name, "", since)
	if err != nil {
		return nil, err
	}
	seen := map[time.Time]bool{}
	var due []cron.Fire
	add := func(f cron.Fire) {
		if !seen[f.At] && !f.At.After(now) && (job.EndAt.IsZero() || f.At.Before(job.EndAt)) {
			seen[f.At] = true
			due = append(due, f)
		}
	}
	for _, at := range open {
		add(s.fireAt(job, at))
	}
	// Gap detection: slots after the last one begun that nobody began.
	// With no slot ever begun, the job starts at fire: no backfill of the
	// time before it existed.
	from := fire.At.Add(-time.Second)
	if !last.IsZero() {
		from = last
		if from.Before(since) {
			from = since.Add(-time.Second)
		}
	}
	to := now
	if !job.EndAt.IsZero() && job.EndAt.Before(now) {
		to = job.EndAt.Add(-time.Nanosecond) // the last slot is before EndAt
	}
	for _, f := range s.latest(job, from, to, job.MaxCatchUp+1) {
		add(f)
	}
	add(fire)
	slices.SortFunc(due, func(a, b cron.Fire) int { return a.At.Compare(b.At) })
	if len(due) > job.MaxCatchUp+1 {
		// Keep the most recent ones: the oldest are the least useful.
		due = due[len(due)-job.MaxCatchUp-1:]
	}
	return due, nil
}

// latest returns the last n fires of job in (from, to], oldest first. It
// walks the schedule from from, n fires at a time: Between gives the
// earliest fires, and after downtime the most recent ones are wanted.
func (s *Scheduler) latest(job *registered, from, to time.Time, n int) []cron.Fire {
	var out []cron.Fire
	for {
		page := job.schedule.Between(from, to, n)
		out = append(out, page...)
		if len(out) > n {
			out = append(out[:0:0], out[len(out)-n:]...)
		}
		if len(page) < n {
			return out
		}
		from = page[len(page)-1].At
	}
}

// fireAt rebuilds the Fire of a slot instant read back from the ledger.
func (s *Scheduler) fireAt(job *registered, at time.Time) cron.Fire {
	if f, ok := job.schedule.Next(at.Add(-time.Second)); ok && f.At.Equal(at) {
		return f
	}
	local := at.In(job.schedule.Zone())
	return cron.Fire{At: at, Local: local, BusinessDate: local.Format(time.DateOnly)}
}

// attempt runs one attempt of slot f under lease l, fenced in the ledger.
func (s *Scheduler) attempt(l *lease.Lease, job *registered, f cron.Fire) {
	ctx := l.Context()
	slot := Slot{Job: job.Name, At: f.At}
	attempt, err := s.cfg.Ledger.Begin(ctx, slot, l.Token(), l.Owner(), job.MaxAttempts)
	if err != nil {
		s.logLedgerRefusal(ctx, slot, l, "begin", err)
		return
	}
	run := Run{
		Slot: slot, Local: f.Local, Zone: job.schedule.Zone().String(), BusinessDate: f.BusinessDate,
		Attempt: attempt, Token: l.Token(), Owner: l.Owner(), IdempotencyKey: slot.Key(),
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "job_claimed",
		slog.String("job", job.Name), slog.Time("slot", f.At), slog.Int("attempt", attempt),
		slog.Uint64("token", uint64(l.Token())), slog.Duration("lag", time.Since(f.At)))
	started := time.Now()
	runErr := runJob(ctx, job.Run, run)
	status, errText := StatusSucceeded, ""
	if runErr != nil {
		status, errText = StatusFailed, runErr.Error()
		if ctx.Err() != nil {
			errText = "interrupted: " + errText
		}
	}
	final := status == StatusFailed && attempt >= job.MaxAttempts
	// The ledger write must go through even though ctx may have ended: the
	// fence, not the context, decides whether it is still ours to make.
	err = s.cfg.Ledger.Finish(context.WithoutCancel(ctx), slot, l.Token(), l.Owner(), attempt, status, errText, final)
	if err != nil {
		s.logLedgerRefusal(ctx, slot, l, "finish", err)
		return
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "job_run_finished",
		slog.String("job", job.Name), slog.Time("slot", f.At), slog.Int("attempt", attempt),
		slog.String("status", string(status)), slog.Duration("took", time.Since(started)), slog.String("error", errText))
}

// runJob calls fn, turning a panic into an error: one bad job must not take
// the scheduler down.
func runJob(ctx context.Context, fn JobFunc, run Run) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("scheduler: job %q panicked: %v", run.Job, r)
		}
	}()
	return fn(ctx, run)
}

func (s *Scheduler) logLedgerRefusal(ctx context.Context, slot Slot, l *lease.Lease, step string, err error) {
	switch {
	case errors.Is(err, ErrSlotDone):
		s.log.LogAttrs(ctx, slog.LevelDebug, "job_claim_skipped",
			slog.String("job", slot.Job), slog.Time("slot", slot.At), slog.String("reason", "done"))
	case errors.Is(err, fence.ErrStaleToken):
		s.log.LogAttrs(ctx, slog.LevelWarn, "stale_token_rejected",
			slog.String("job", slot.Job), slog.Time("slot", slot.At), slog.String("step", step),
			slog.Uint64("token", uint64(l.Token())), slog.Any("error", err))
	default:
		s.log.LogAttrs(ctx, slog.LevelError, "ledger_error",
			slog.String("job", slot.Job), slog.Time("slot", slot.At), slog.String("step", step), slog.Any("error", err))
	}
}
