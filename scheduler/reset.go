package scheduler

import (
	"context"
	"log/slog"
	"time"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// This file is a replica's memory of its ledger, per (job, partition), and
// what it does when it finds that the ledger lost its data (a Redis
// restart without persistence, a failover that lost writes): a reset.
//
// A ledger that lost its data answers State with a new horizon (it starts
// one at the first read after the loss) and no last slot, so the planner
// alone would start afresh at the claim's own fire: the slots that came
// due while the store was down, whose claims failed, would vanish with
// neither an effect nor a record. So every replica keeps, in process, what
// it saw of each unit's ledger: the horizon, the latest slot the ledger
// showed or this replica wrote (recorded), and the latest slot it knows to
// be recorded or in another holder's hands (sure: a scheduled fire whose
// claim found the lease held counts, its holder answers for it). A State
// whose horizon moved, or whose last slot went back behind recorded, is a
// reset: logged ledger_reset, counted (Observer.LedgerReset), and the slots after
// sure, up to now, are planned as after any downtime: the claim plans as if
// the ledger's last slot were sure and its horizon the one before the
// loss, so they run per Job.Missed within CatchUpWindow or are recorded
// skipped with a reason (plan.go). Slots at or before sure are never run
// again: this replica ran them, saw them begun, or saw another holder
// claim them. But a lease found held at a fire does not prove its holder
// ran the slot (it may have been cut off from the store, or failed on
// it), and its record, if any, is gone: so the slots after recorded, up
// to sure, are recorded skipped with reasonRecordLost ("outcome
// unknown"), and the ledger_reset event names that range (unknown_after,
// after). Every slot of the range then has a record, or an effect its
// sink keeps once by the idempotency key. The simulator found the slots
// left with neither (docs/simulation.md, former findings).
//
// Finding a reset needs a State read: the fast path
// (ledger.ClearBeginner) carries recorded as BeginRequest.Seen, and a
// ledger whose last slot is missing or before it answers not clear, so
// the claim plans.
//
// A claim that failed on a store error (its lease, a State read, a Begin,
// a Skip) leaves the unit in doubt: its next claim plans, reading State,
// rather than take the fast path (ledger.ClearBeginner), whose answer on
// an empty ledger (no last slot: clear) would hide the reset. Doubt and a
// found reset's gap last until a claim carried a plan out in full.
//
// The memory lives in process: a replica that restarts during the loss
// knows nothing, and a loss no replica saw (every replica restarted) is
// not found. See docs/guarantees.md.

// gapStart is where the gap of a reset found now starts (its slots are
// after it): sure, or just before the earliest slot whose claim failed
// since, when that is earlier. A fire found held by another replica
// counts as sure, but its holder may have failed on the store: it has the
// slot in its own gap. Zero: this replica knows of no slot.
func (m *ledgerMemory) gapStart() time.Time {
	sure, failed := m.sure.time(), m.failedFrom.time()
	if f := failed.Add(-time.Second); !failed.IsZero() && (sure.IsZero() || f.Before(sure)) {
		return f
	}
	return sure
}

// noteSure records that the slot at at is recorded in the ledger (wrote
// true: this replica wrote it, or read it there) or in another holder's
// hands.
func (s *Scheduler) noteSure(u *unit, at time.Time, wrote bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	a := instantOf(at)
	u.mem.sure = max(u.mem.sure, a)
	if wrote {
		u.mem.recorded = max(u.mem.recorded, a)
	}
}

// noteDoubt records that a claim of u failed on a store error, for the
// slot at at (zero: a wake-up's claim, no slot of its own).
func (s *Scheduler) noteDoubt(u *unit, at time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.mem.doubt = true
	if a := instantOf(at); a != 0 && (u.mem.failedFrom == 0 || a < u.mem.failedFrom) {
		u.mem.failedFrom = a
	}
}

// inDoubt reports whether u's next claim must plan (see noteDoubt), and
// recorded, the latest slot this replica knows the ledger recorded: the
// fast path's ledger.BeginRequest.Seen, which makes a ledger that lost it
// answer not clear, so the claim plans and finds the reset.
func (s *Scheduler) inDoubt(u *unit) (doubt bool, recorded time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.mem.doubt || u.mem.gapFrom != 0, u.mem.recorded.time()
}

// readState takes in a State of u read at now: it finds a reset (logs
// ledger_reset, counts it), remembers what st shows, and returns the
// State the planner must see (the gap of a reset not yet carried out
// laid over it) and the gap's start (zero: none).
func (s *Scheduler) readState(ctx context.Context, u *unit, st ledger.State, now time.Time) (ledger.State, time.Time) {
	st, gapFrom, found := s.rememberState(u, st, now)
	if found != nil {
		// Logged after the unit's lock is released: a slow handler holds
		// up no claim.
		s.log.LogAttrs(s.life.claim, slog.LevelWarn, "ledger_reset", found...)
		s.obs.LedgerReset(u.job.Name)
		traceEvent(ctx, eventLedgerReset, ledger.Slot{Job: u.job.Name, Partition: u.partition, At: now})
	}
	return st, gapFrom
}

// rememberState is readState's part under u.mu; found holds the
// ledger_reset event's attributes when st shows a reset.
func (s *Scheduler) rememberState(u *unit, st ledger.State, now time.Time) (_ ledger.State, gapFrom time.Time, found []slog.Attr) {
	u.mu.Lock()
	defer u.mu.Unlock()
	m := &u.mem
	horizon, recorded := m.horizon.time(), m.recorded.time()
	reset := !s.resetCheckOff && ((!horizon.IsZero() && !st.Horizon.IsZero() && !st.Horizon.Equal(horizon)) ||
		st.Last.Before(recorded))
	if reset {
		if from := m.gapStart(); m.gapFrom == 0 && !from.IsZero() {
			m.gapFrom, m.gapHorizon = instantOf(from), m.horizon
			lost := recorded
			if h := horizon.Truncate(time.Second).Add(-time.Second); lost.IsZero() && !horizon.IsZero() {
				lost = h
			}
			if !lost.IsZero() && lost.Before(from) {
				m.lostFrom = instantOf(lost)
			}
		}
		found = []slog.Attr{slog.String("job", u.job.Name), slog.String("partition", u.partition)}
		for _, a := range []slog.Attr{slog.Time("horizon_before", horizon), slog.Time("horizon", st.Horizon),
			slog.Time("last_recorded", recorded), slog.Time("last", st.Last),
			slog.Time("unknown_after", m.lostFrom.time()), slog.Time("after", m.gapFrom.time()), slog.Time("until", now)} {
			if !a.Value.Time().IsZero() { // a time not known is left out, not 0001-01-01
				found = append(found, a)
			}
		}
		m.recorded = instantOf(st.Last)
	}
	if !st.Horizon.IsZero() {
		m.horizon = instantOf(st.Horizon)
	}
	last := instantOf(st.Last)
	m.recorded = max(m.recorded, last)
	if m.gapFrom == 0 {
		m.sure = max(m.sure, last)
		return st, time.Time{}, found
	}
	st.Last, st.Horizon = m.gapFrom.time(), m.gapHorizon.time()
	if m.lostFrom != 0 {
		st.Last = m.lostFrom.time()
	}
	return st, m.gapFrom.time(), found
}

// planDone records that a claim of u carried out in full a plan made from
// a State read (with the gap from gapFrom laid over it, when not zero):
// u is no longer in doubt, and that gap is handled.
func (s *Scheduler) planDone(u *unit, gapFrom time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.mem.doubt, u.mem.failedFrom = false, 0
	if !gapFrom.IsZero() && u.mem.gapFrom == instantOf(gapFrom) {
		u.mem.gapFrom, u.mem.gapHorizon, u.mem.lostFrom = 0, 0, 0
	}
}
