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
// (ledger.ClearBeginner) never begins a slot of a unit with no last slot,
// since an empty store looks like a new unit.
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
	if f := m.failedFrom.Add(-time.Second); !m.failedFrom.IsZero() && (m.sure.IsZero() || f.Before(m.sure)) {
		return f
	}
	return m.sure
}

// noteSure records that the slot at at is recorded in the ledger (wrote
// true: this replica wrote it, or read it there) or in another holder's
// hands.
func (s *Scheduler) noteSure(u *unit, at time.Time, wrote bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if at.After(u.mem.sure) {
		u.mem.sure = at
	}
	if wrote && at.After(u.mem.recorded) {
		u.mem.recorded = at
	}
}

// noteDoubt records that a claim of u failed on a store error, for the
// slot at at (zero: a wake-up's claim, no slot of its own).
func (s *Scheduler) noteDoubt(u *unit, at time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.mem.doubt = true
	if !at.IsZero() && (u.mem.failedFrom.IsZero() || at.Before(u.mem.failedFrom)) {
		u.mem.failedFrom = at
	}
}

// inDoubt reports whether u's next claim must plan (see noteDoubt).
func (s *Scheduler) inDoubt(u *unit) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.mem.doubt || !u.mem.gapFrom.IsZero()
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
	reset := !s.resetCheckOff && ((!m.horizon.IsZero() && !st.Horizon.IsZero() && !st.Horizon.Equal(m.horizon)) ||
		st.Last.Before(m.recorded))
	if reset {
		if from := m.gapStart(); m.gapFrom.IsZero() && !from.IsZero() {
			m.gapFrom, m.gapHorizon = from, m.horizon
			lost := m.recorded
			if h := m.horizon.Truncate(time.Second).Add(-time.Second); lost.IsZero() && !m.horizon.IsZero() {
				lost = h
			}
			if !lost.IsZero() && lost.Before(from) {
				m.lostFrom = lost
			}
		}
		found = []slog.Attr{slog.String("job", u.job.Name), slog.String("partition", u.partition)}
		for _, a := range []slog.Attr{slog.Time("horizon_before", m.horizon), slog.Time("horizon", st.Horizon),
			slog.Time("last_recorded", m.recorded), slog.Time("last", st.Last),
			slog.Time("unknown_after", m.lostFrom), slog.Time("after", m.gapFrom), slog.Time("until", now)} {
			if !a.Value.Time().IsZero() { // a time not known is left out, not 0001-01-01
				found = append(found, a)
			}
		}
		m.recorded = st.Last
	}
	if !st.Horizon.IsZero() {
		m.horizon = st.Horizon
	}
	if st.Last.After(m.recorded) {
		m.recorded = st.Last
	}
	if m.gapFrom.IsZero() {
		if st.Last.After(m.sure) {
			m.sure = st.Last
		}
		return st, time.Time{}, found
	}
	st.Last, st.Horizon = m.gapFrom, m.gapHorizon
	if !m.lostFrom.IsZero() {
		st.Last = m.lostFrom
	}
	return st, m.gapFrom, found
}

// planDone records that a claim of u carried out in full a plan made from
// a State read (with the gap from gapFrom laid over it, when not zero):
// u is no longer in doubt, and that gap is handled.
func (s *Scheduler) planDone(u *unit, gapFrom time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.mem.doubt, u.mem.failedFrom = false, time.Time{}
	if !gapFrom.IsZero() && u.mem.gapFrom.Equal(gapFrom) {
		u.mem.gapFrom, u.mem.gapHorizon, u.mem.lostFrom = time.Time{}, time.Time{}, time.Time{}
	}
}
