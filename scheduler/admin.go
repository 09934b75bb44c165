package scheduler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// JobInfo describes a registered job for operators.
type JobInfo struct {
	Name       string
	Spec       string
	Zone       string
	Partitions []string
	// Next is the job's next scheduled slot after now (zero if none).
	Next time.Time
	// EndAt is Job.EndAt (zero: none), and Ended reports that it has
	// passed: no slot of the job comes due any more (its slots can still
	// be listed and retried).
	EndAt time.Time
	Ended bool
	// Overlap is the job's overlap policy.
	Overlap OverlapPolicy
}

// statusScan is how many of the newest records of each partition
// JobStatus reads to find the newest success (100).
const statusScan = 100

// JobStatus is what the ledger says of a job now, for operators.
type JobStatus struct {
	// Paused reports the job's pause flag (Pause, Resume).
	Paused bool
	// Last is the newest record across the job's partitions (the latest
	// slot; for equal slots, the first partition in Partitions order);
	// HasLast is false when the ledger holds none.
	Last    ledger.Record
	HasLast bool
	// LastSuccess is the newest succeeded record among the 100
	// newest of each partition; HasSuccess is false when there is none.
	LastSuccess ledger.Record
	HasSuccess  bool
	// Skipped and Failed count the job's records, across its partitions,
	// whose slot is at or after Since: Skipped those the job did not run
	// (skipped by the overlap policy, or missed), Failed those that ran
	// and did not succeed (failed or abandoned). A last status of
	// "succeeded" with Skipped > 0 means slots were lost in between: see
	// Job.Overlap. Since is an hour before now, or later when a partition
	// holds more than 100 records in that hour (the counts then cover the
	// 100 newest of that partition, and every record of the others since
	// the same instant).
	Skipped, Failed int
	Since           time.Time
}

// statusWindow is how far back JobStatus counts skipped and failed
// records (1 h).
const statusWindow = time.Hour

// JobStatus reads job's pause flag and newest records from the ledger
// (one read per partition, plus one for the flag). It writes nothing on a
// ledger that implements ledger.PauseReader; on one that does not, the
// flag comes from State of the job's first partition, which starts that
// pair's horizon if it had none. ErrUnknownJob for an unknown job.
func (s *Scheduler) JobStatus(ctx context.Context, job string) (JobStatus, error) {
	if err := s.ready(ctx); err != nil {
		return JobStatus{}, err
	}
	r, ok := s.jobByName(job)
	if !ok {
		return JobStatus{}, fmt.Errorf("%w: %q", ErrUnknownJob, job)
	}
	var st JobStatus
	var err error
	if st.Paused, err = s.paused(ctx, job, r.Partitions[0]); err != nil {
		return JobStatus{}, err
	}
	now := s.clock.Now()
	to := now.Add(time.Second)
	st.Since = now.Add(-statusWindow).UTC().Truncate(time.Second)
	read := make([][]ledger.Record, 0, len(r.Partitions))
	for _, p := range r.Partitions {
		recs, err := s.cfg.Ledger.List(ctx, job, p, time.Time{}, to, statusScan)
		if err != nil {
			return JobStatus{}, err
		}
		read = append(read, recs)
		if len(recs) == statusScan && recs[len(recs)-1].Slot.At.After(st.Since) {
			st.Since = recs[len(recs)-1].Slot.At // older records of p were not read
		}
		if len(recs) > 0 && (!st.HasLast || recs[0].Slot.At.After(st.Last.Slot.At)) {
			st.Last, st.HasLast = recs[0], true
		}
		for _, rec := range recs {
			if rec.Status != ledger.StatusSucceeded {
				continue
			}
			if !st.HasSuccess || rec.Slot.At.After(st.LastSuccess.Slot.At) {
				st.LastSuccess, st.HasSuccess = rec, true
			}
			break
		}
	}
	for _, recs := range read {
		for _, rec := range recs {
			if rec.Slot.At.Before(st.Since) {
				break // newest first
			}
			switch rec.Status {
			case ledger.StatusSkipped, ledger.StatusMissed:
				st.Skipped++
			case ledger.StatusFailed, ledger.StatusAbandoned:
				st.Failed++
			}
		}
	}
	st.Last, st.LastSuccess = s.redacted(st.Last), s.redacted(st.LastSuccess)
	return st, nil
}

// Paused reports job's pause flag (Pause, Resume): while it is set, no
// replica runs the job, and a Trigger, Retry or Backfill asked for
// meanwhile waits for Resume. It writes nothing on a ledger that
// implements ledger.PauseReader (as JobStatus). ErrUnknownJob for an
// unknown job; ledger errors.
func (s *Scheduler) Paused(ctx context.Context, job string) (bool, error) {
	if err := s.ready(ctx); err != nil {
		return false, err
	}
	r, ok := s.jobByName(job)
	if !ok {
		return false, fmt.Errorf("%w: %q", ErrUnknownJob, job)
	}
	return s.paused(ctx, job, r.Partitions[0])
}

func (s *Scheduler) paused(ctx context.Context, job, partition string) (bool, error) {
	if pr, ok := s.cfg.Ledger.(ledger.PauseReader); ok {
		return pr.Paused(ctx, job)
	}
	st, err := s.cfg.Ledger.State(ctx, job, partition, s.clock.Now(), s.clock.Now())
	return st.Paused, err
}

// Record returns the ledger record of (job, partition)'s slot at at
// (truncated to the second); found is false when the ledger has none.
// Attempt errors pass through Options.Redact, as in Runs and JobStatus.
// ErrUnknownJob for an unknown job or partition.
func (s *Scheduler) Record(ctx context.Context, job, partition string, at time.Time) (rec ledger.Record, found bool, err error) {
	if err := s.ready(ctx); err != nil {
		return ledger.Record{}, false, err
	}
	if _, err := s.unit(job, partition); err != nil {
		return ledger.Record{}, false, err
	}
	rec, found, err = s.cfg.Ledger.Get(ctx, ledger.Slot{Job: job, At: at.UTC().Truncate(time.Second), Partition: partition})
	return s.redacted(rec), found, err
}

// redacted returns rec with its attempts' errors masked (maskOwner, then
// Options.Redact): records stored before Redact was set, or by a replica
// without it, are shown masked too.
func (s *Scheduler) redacted(rec ledger.Record) ledger.Record {
	for i := range rec.Attempts {
		a := &rec.Attempts[i]
		a.Error = s.cfg.Redact(maskOwner(a.Error, a.Owner))
	}
	return rec
}

// Jobs lists the registered jobs, in registration order.
func (s *Scheduler) Jobs() []JobInfo {
	if s.ready(context.Background()) != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []JobInfo
	seen := map[string]bool{}
	for _, u := range s.order {
		if seen[u.job.Name] {
			continue
		}
		seen[u.job.Name] = true
		info := JobInfo{Name: u.job.Name, Spec: u.job.Spec, Zone: u.job.window.sched.Zone().String(),
			Partitions: append([]string(nil), u.job.Partitions...), Overlap: u.job.Overlap}
		now := s.clock.Now()
		if f, ok := u.job.window.next(now); ok {
			info.Next = f.At
		}
		if !u.job.EndAt.IsZero() {
			info.EndAt, info.Ended = u.job.EndAt.UTC(), !u.job.EndAt.After(now)
		}
		out = append(out, info)
	}
	return out
}

// Runs lists the ledger records of (job, partition) with from <= slot < to,
// newest first, at most limit, their attempt errors passed through
// Options.Redact. ErrUnknownJob for an unknown job/partition,
// ErrInvalidArgument for limit < 1 or from >= to.
func (s *Scheduler) Runs(ctx context.Context, job, partition string, from, to time.Time, limit int) ([]ledger.Record, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	if _, err := s.unit(job, partition); err != nil {
		return nil, err
	}
	if limit < 1 || !to.After(from) {
		return nil, fmt.Errorf("%w: want limit >= 1 and from < to", ErrInvalidArgument)
	}
	recs, err := s.cfg.Ledger.List(ctx, job, partition, from, to, limit)
	for i := range recs {
		recs[i] = s.redacted(recs[i])
	}
	return recs, err
}

// Retry asks for a new attempt of the slot of (job, partition) at at, with
// reason recorded in the ledger ("retry: <reason>", "retry" when reason is
// empty): the same logical run, a fresh attempt budget. The slot must be
// one of the job's: a fire of its schedule, at or after StartAt and before
// EndAt; at names the slot of its second (slots are whole seconds:
// 09:00:00.300 is the 09:00:00 slot). The run starts at the next claim on
// any replica, at once on this one when started (on a Scheduler never
// started, at the unit's next fire, retry or restart elsewhere: see
// "Operations" in the package doc); a slot still to come is recorded
// pending and runs when it comes due, not before.
//
// Errors: ErrUnknownJob; ErrInvalidArgument wrapped when at is not a slot
// of the schedule or lies outside [StartAt, EndAt), or, for an
// OverlapAllow job, before the ledger's prune cutoff (its pruned slots are
// closed: ledger.Pruner); ErrSlotRunning; ledger errors.
func (s *Scheduler) Retry(ctx context.Context, job, partition string, at time.Time, reason string) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	u, err := s.unit(job, partition)
	if err != nil {
		return err
	}
	at = at.UTC().Truncate(time.Second)
	if err := u.job.window.refuse(at); err != nil {
		return err
	}
	if !u.job.window.isSlot(at) {
		return fmt.Errorf("%w: %s is not a slot of %q", ErrInvalidArgument, at.Format(time.RFC3339), job)
	}
	if err := s.refuseClosed(ctx, u, at); err != nil {
		return err
	}
	return s.request(ctx, u, at, withReason("retry", reason))
}

// refuseClosed refuses, for an OverlapAllow job, a slot at or after from
// that lies before the ledger's prune cutoff (State.Pruned): Prune took
// that slot's own fence with its record, and no attempt of it can begin
// again (ledger.Pruner). It reads the unit's State; other jobs pass at
// once.
func (s *Scheduler) refuseClosed(ctx context.Context, u *unit, from time.Time) error {
	if u.job.Overlap != OverlapAllow {
		return nil
	}
	now := s.clock.Now()
	st, err := s.cfg.Ledger.State(ctx, u.job.Name, u.partition, now, now)
	if err != nil {
		return err
	}
	if from.Before(st.Pruned) {
		return fmt.Errorf("%w: %s is before the ledger's prune cutoff %s: an OverlapAllow job's pruned slots are closed (Options.Retention)",
			ErrInvalidArgument, from.UTC().Format(time.RFC3339), st.Pruned.UTC().Format(time.RFC3339))
	}
	return nil
}

// Trigger asks for an extra run of (job, partition) now, outside the
// schedule: a slot at the current second, which runs even when the
// schedule does not fire then, with an identity and idempotency key of
// its own (ErrTriggerTaken when that second is a slot of the schedule or
// already has a run: Trigger never reruns one), with reason recorded ("trigger: <reason>",
// "trigger" when reason is empty). It returns that slot. A trigger is an
// operator's explicit request: the overlap policy does not apply to it (see
// Job.Overlap). ErrUnknownJob; ErrInvalidArgument wrapped before the job's
// StartAt (it has not started) and at or after its EndAt (it has ended):
// the job has no slot then and the run would never start; ledger errors.
func (s *Scheduler) Trigger(ctx context.Context, job, partition, reason string) (ledger.Slot, error) {
	if err := s.ready(ctx); err != nil {
		return ledger.Slot{}, err
	}
	u, err := s.unit(job, partition)
	if err != nil {
		return ledger.Slot{}, err
	}
	at := s.clock.Now().UTC().Truncate(time.Second)
	if err := u.job.window.refuse(at); err != nil {
		return ledger.Slot{}, err
	}
	slot := ledger.Slot{Job: job, At: at, Partition: partition}
	// A trigger is a run of its own: the slot at a second the schedule
	// fires, or one that already has a run, would share that run's
	// identity and idempotency key (the downstream would replay the old
	// response). Refuse it rather than run the old slot again.
	if u.job.window.isSlot(at) {
		return ledger.Slot{}, fmt.Errorf("%w: %w: %s is a slot of the schedule (use Retry to run it again)", ErrInvalidArgument, ErrTriggerTaken, at.Format(time.RFC3339))
	}
	if _, found, err := s.cfg.Ledger.Get(ctx, slot); err != nil {
		return ledger.Slot{}, err
	} else if found {
		return ledger.Slot{}, fmt.Errorf("%w: %w: %s already has a run (use Retry to run it again)", ErrInvalidArgument, ErrTriggerTaken, at.Format(time.RFC3339))
	}
	return slot, s.request(ctx, u, at, withReason("trigger", reason))
}

// ErrTriggerTaken (wrapped with ErrInvalidArgument) is Trigger's answer
// when the current second is a slot of the job's schedule or already has
// a run: the trigger would share that slot's idempotency key, so it does
// not run; trigger again a second later, or Retry the slot.
var ErrTriggerTaken = errors.New("scheduler: trigger second is taken by a scheduled or earlier run")

// Backfill asks for a run of every slot of (job, partition) with
// from <= slot < to (at most 1000), as Retry does for one, reason
// recorded ("backfill: <reason>", "backfill" when empty). The range is
// clipped to the job's [StartAt, EndAt): slots outside it do not exist and
// are not asked for. It returns the slots asked for. Running slots are
// left alone. Slots after now are asked for too, as Retry asks for one:
// recorded pending (a prune keeps them), each runs once when it comes due,
// its schedule's fire included. ErrInvalidArgument for from >= to, a range
// with nothing left inside [StartAt, EndAt), one of more than 1000 slots,
// or, for an
// OverlapAllow job, one that starts before the ledger's prune cutoff (its
// pruned slots are closed: ledger.Pruner).
func (s *Scheduler) Backfill(ctx context.Context, job, partition string, from, to time.Time, reason string) ([]ledger.Slot, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	u, err := s.unit(job, partition)
	if err != nil {
		return nil, err
	}
	if !to.After(from) {
		return nil, fmt.Errorf("%w: backfill wants from < to", ErrInvalidArgument)
	}
	w := u.job.window
	if !w.start.IsZero() && from.Before(w.start) {
		from = w.start
	}
	if !w.end.IsZero() && to.After(w.end) {
		to = w.end
	}
	if !to.After(from) {
		return nil, fmt.Errorf("%w: backfill range lies outside the job's %s", ErrInvalidArgument, w.bounds())
	}
	// Between floors to the second and excludes its from: less a
	// nanosecond, the fires are those with from <= fire < to, bounds
	// between seconds included (window.beforeStart).
	fires := w.sched.Between(from.Add(-time.Nanosecond), to.Add(-time.Nanosecond), maxBackfill+1)
	if len(fires) > maxBackfill {
		return nil, fmt.Errorf("%w: backfill of more than %d slots", ErrInvalidArgument, maxBackfill)
	}
	if len(fires) > 0 {
		if err := s.refuseClosed(ctx, u, fires[0].At); err != nil {
			return nil, err
		}
	}
	var out []ledger.Slot
	for _, f := range fires {
		if !w.has(f.At) {
			continue
		}
		slot := ledger.Slot{Job: job, At: f.At, Partition: partition}
		err := s.cfg.Ledger.Request(ctx, slot, withReason("backfill", reason), s.clock.Now())
		if err != nil && !errors.Is(err, ledger.ErrSlotRunning) {
			return out, err
		}
		if err == nil {
			out = append(out, slot)
		}
	}
	s.poke(u)
	return out, nil
}

// withReason is the reason an operation records: "op: reason", or op
// alone when reason is empty.
func withReason(op, reason string) string {
	if reason == "" {
		return op
	}
	return op + ": " + reason
}

// Pause stops every replica from running job's slots (they are still
// recorded as due and run on Resume, within the catch-up policy).
func (s *Scheduler) Pause(ctx context.Context, job string) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	if _, ok := s.jobByName(job); !ok {
		return fmt.Errorf("%w: %q", ErrUnknownJob, job)
	}
	return s.cfg.Ledger.SetPaused(ctx, job, true)
}

// Resume undoes Pause. With skipPaused false, the slots that came due
// while the job was paused are then caught up as Job.Missed says (by
// default, MissedCatchUp: up to MaxCatchUp of them within CatchUpWindow).
//
// With skipPaused true, it records them skipped (reason "paused"),
// whatever Job.Missed says: none of them runs, the next one does
// (Temporal's unpause, a Kubernetes CronJob's suspend with a short
// startingDeadlineSeconds). Open slots (a retry that was waiting, an
// operator's request) still run. Before it clears the pause flag it takes
// each partition's lease (waiting for it, bounded by ctx) to record the
// skips under the lease's fence, so no replica catches a paused slot up in
// between; at most the latest 1000 of a partition's paused slots are
// recorded, older ones are passed over unrecorded. On a job that is not
// paused, skipPaused changes nothing.
//
// Errors: ErrUnknownJob; with skipPaused, ctx's error while waiting for a
// lease; the ledger's. On an error the job stays paused (a partition's
// skips already recorded stay).
func (s *Scheduler) Resume(ctx context.Context, job string, skipPaused bool) error {
	return s.resume(ctx, job, skipPaused)
}

func (s *Scheduler) resume(ctx context.Context, job string, skip bool) error {
	if err := s.ready(ctx); err != nil {
		return err
	}
	r, ok := s.jobByName(job)
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownJob, job)
	}
	if skip {
		paused, err := s.paused(ctx, job, r.Partitions[0])
		if err != nil {
			return err
		}
		for _, p := range r.Partitions {
			if !paused {
				break
			}
			if err := s.skipPaused(ctx, r, p); err != nil {
				return err
			}
		}
	}
	if err := s.cfg.Ledger.SetPaused(ctx, job, false); err != nil {
		return err
	}
	for _, p := range r.Partitions {
		if u, err := s.unit(job, p); err == nil {
			s.poke(u)
		}
	}
	return nil
}

// skipPaused records the paused slots of (r, partition) skipped under
// the partition's lease (pausedSlots decides which).
func (s *Scheduler) skipPaused(ctx context.Context, r *registered, partition string) error {
	u, err := s.unit(r.Name, partition)
	if err != nil {
		return err
	}
	l, err := s.cfg.Leases.Acquire(ctx, u.lease, r.LeaseTTL)
	if err != nil {
		return err
	}
	defer func() { _ = l.Release(context.WithoutCancel(ctx)) }()
	h := s.newHold(u, l)
	now := s.clock.Now()
	st, err := s.cfg.Ledger.State(h.ctx(), r.Name, partition, r.window.since(now), now)
	if err != nil {
		return err
	}
	for _, f := range pausedSlots(r, st, now) {
		if err := s.skip(h, step{fire: f, skip: ledger.StatusSkipped, reason: "paused"}); err != nil {
			return err
		}
	}
	return nil
}

func (s *Scheduler) request(ctx context.Context, u *unit, at time.Time, reason string) error {
	slot := ledger.Slot{Job: u.job.Name, At: at, Partition: u.partition}
	if err := s.cfg.Ledger.Request(ctx, slot, reason, s.clock.Now()); err != nil {
		return err
	}
	s.poke(u)
	return nil
}

// poke wakes u now when the scheduler runs.
func (s *Scheduler) poke(u *unit) {
	s.mu.Lock()
	started := s.started && s.claimCancel != nil && s.life.claim.Err() == nil
	s.mu.Unlock()
	if started {
		s.wakeAt(u, s.clock.Now())
	}
}

func (s *Scheduler) unit(job, partition string) (*unit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.units[unitKey{job, partition}]
	if !ok {
		return nil, fmt.Errorf("%w: %q partition %q", ErrUnknownJob, job, partition)
	}
	return u, nil
}

func (s *Scheduler) jobByName(job string) (*registered, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.jobs[job]
	return r, ok
}
