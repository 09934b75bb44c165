package scheduler

import (
	"slices"
	"time"

	"github.com/holdfast-go/holdfast/scheduler/cron"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// This file decides every slot's fate. planClaim is a pure function of the
// ledger's State, the job, what this claim did so far and the time: it
// returns the steps (run, or record skipped or missed) that the claim then
// carries out under its lease (claim.go). A slot the planner sees falls in
// exactly one class, tested in this order:
//
//   - open: the ledger lists it (requested, failed with its retry time
//     passed, abandoned by a holder that lost the lease): run it; one still
//     waiting for its retry time is left alone, whatever else applies.
//   - outside: older than CatchUpWindow (and after the last slot the
//     ledger saw): recorded skipped, reason "missed: older than
//     CatchUpWindow", the latest maxGapRecords of them; older ones are
//     left unrecorded and reported in the plan (logged slots_unrecorded).
//   - overlapped: came due during one of this claim's runs: the overlap
//     policy (forbid: skipped "overlap"; buffer-one and cancel-other: the
//     latest runs).
//   - missed: came due while this replica could not act on it: before the
//     scheduler started, during a process freeze or a forward clock jump,
//     or while a claim waited (a slow lease or ledger round trip), that is,
//     planned more than lateAfter after its time, or (but for the claim's
//     own fire) at or before the last slot whose claim had started
//     (claimState.seen): the missed-slot policy (Job.Missed, MaxCatchUp).
//   - due: run it.
//
// A job the ledger never saw (State.Last zero) has no gap: it starts at
// its current fire, with no backfill of the time before it existed. Slots
// before the ledger's horizon are never looked at: a store that lost its
// data may have run them.

// maxLateness bounds how late a slot may be planned and still count as on
// time (5 s): a slot planned later than the smaller of this and its
// schedule's interval came due while the replica could not act, and
// follows the job's missed-slot policy as after a restart.
const maxLateness = 5 * time.Second

// maxGapRecords bounds how many slots older than CatchUpWindow one claim
// records skipped (1000, maxBackfill: one Backfill can ask for all of them).
const maxGapRecords = maxBackfill

// step is one thing a claim does for a slot: run it, or record it skipped
// or missed.
type step struct {
	fire   cron.Fire
	skip   ledger.Status // "" to run
	reason string
	open   bool // listed by the ledger (State.Open): asked for by an operator, retried or taken over
}

// claimState is what one claim carries from one plan to the next.
type claimState struct {
	// handled holds the slots this claim ran or skipped.
	handled map[time.Time]bool
	// seen is the latest slot whose claim had started before this one:
	// a never-begun slot at or before it was missed.
	seen time.Time
	// runFrom and runTo span this claim's attempts (zero before the
	// first): a slot that came due within it overlapped a run.
	runFrom, runTo time.Time
	// broken: the last carryOut stopped before its plan's end (a store
	// error, the lease lost).
	broken bool
	// lostTo, when not zero, ends the range of a found ledger reset
	// whose slots this replica never saw recorded (reset.go): those up to
	// it that the plan looks at are recorded skipped, reasonRecordLost.
	lostTo time.Time
	// prunedTo, when not zero in a plan of a reset's gap, is the ledger's
	// State.Pruned: the records of done slots before it may have been
	// pruned since someone planned them, so the gap's slots before it are
	// left alone (a request for one, an open slot, still runs).
	prunedTo time.Time
}

// pruned reports whether g, in a plan of a reset's gap, is before the
// ledger's prune cutoff: another replica may have planned it, and a Prune
// deleted its record since. The claim's own fire never is.
func (cs *claimState) pruned(g, fire cron.Fire) bool {
	return g.At.Before(cs.prunedTo) && !g.At.Equal(fire.At)
}

// reasonRecordLost is the reason recorded for a slot of a ledger reset's
// range that this replica never saw recorded: another holder had its
// lease at its fire, and its record, if it had one, is lost. Its effect
// may have happened: the ledger no longer knows.
const reasonRecordLost = "ledger_reset: record lost, outcome unknown"

func newClaimState(seen time.Time) *claimState {
	return &claimState{handled: map[time.Time]bool{}, seen: seen}
}

// plan is what planClaim decided.
type plan struct {
	steps   []step    // oldest first
	retryAt time.Time // the earliest retry still to come (zero: none)
	paused  bool
	// unrecorded counts the slots older than the ones recorded as
	// outside CatchUpWindow, from first to last: only logged.
	unrecorded  int
	first, last time.Time
}

// lateAfter is how long after its time a slot may be planned and still be
// on time: the smaller of maxLateness and the schedule's interval there.
func (w window) lateAfter(at time.Time) time.Duration {
	if iv := w.interval(at); iv > 0 && iv < maxLateness {
		return iv
	}
	return maxLateness
}

// planClaim lists what a claim of one (job, partition) does now, oldest
// first, leaving out the slots it already handled. fire is the scheduled
// slot the claim was started for (zero At for a wake-up).
func planClaim(job *registered, st ledger.State, cs *claimState, fire cron.Fire, now time.Time) plan {
	if st.Paused {
		return plan{paused: true}
	}
	pl := &planner{job: job, cs: cs, now: now, since: job.window.since(now),
		byAt: map[time.Time]step{}, waiting: map[time.Time]bool{}}
	if st.Horizon.After(pl.since) {
		pl.since = st.Horizon.Truncate(time.Second)
	}
	// The first step listed for a slot wins: an open slot is run even when
	// it is also a gap slot, and a slot waiting for its retry time is not
	// begun early by a late timer.
	pl.open(st.Open)
	pl.classify(pl.candidates(st, fire), fire)
	for _, s := range pl.byAt {
		pl.p.steps = append(pl.p.steps, s)
	}
	slices.SortFunc(pl.p.steps, func(a, b step) int { return a.fire.At.Compare(b.fire.At) })
	return pl.p
}

// planner is one planClaim at work.
type planner struct {
	job     *registered
	cs      *claimState
	now     time.Time
	since   time.Time // the oldest slot run late: CatchUpWindow, StartAt, the horizon
	byAt    map[time.Time]step
	waiting map[time.Time]bool // open slots waiting for their retry time
	p       plan
}

// add lists s unless its slot has a step already, waits for its retry
// time, was handled by this claim, is still to come, or is not a slot of
// the job.
func (pl *planner) add(s step) {
	at := s.fire.At
	if _, dup := pl.byAt[at]; dup || pl.waiting[at] || pl.cs.handled[at] || at.After(pl.now) || !pl.job.window.has(at) {
		return
	}
	pl.byAt[at] = s
}

// open runs the open slots whose retry time has come and notes the
// earliest retry still to come.
func (pl *planner) open(open []ledger.OpenSlot) {
	for _, o := range open {
		if o.RetryAt.After(pl.now) {
			pl.waiting[o.At] = true
			if pl.p.retryAt.IsZero() || o.RetryAt.Before(pl.p.retryAt) {
				pl.p.retryAt = o.RetryAt
			}
			continue
		}
		pl.add(step{fire: pl.job.window.fireAt(o.At), open: true})
	}
}

// candidates returns the slots after the last one the ledger saw (and
// after the horizon) up to now, within the catch-up window, plus the
// claim's own fire, oldest first. It records the gap older than the
// window as skipped (at most maxGapRecords, the rest counted).
func (pl *planner) candidates(st ledger.State, fire cron.Fire) []cron.Fire {
	w := pl.job.window
	var out []cron.Fire
	if !st.Last.IsZero() {
		floor := st.Last
		if h := st.Horizon.Truncate(time.Second).Add(-time.Second); h.After(floor) {
			floor = h
		}
		if floor.Before(pl.since) {
			pl.outside(w.between(floor, pl.since.Add(-time.Second), 1<<20))
			floor = pl.since.Add(-time.Second)
		}
		out = w.between(floor, pl.now, 1<<16)
	}
	// The claim's own fire is always looked at, whatever the horizon and
	// the window: late, it is missed like the others.
	if !fire.At.IsZero() && !slices.ContainsFunc(out, func(g cron.Fire) bool { return g.At.Equal(fire.At) }) {
		out = append(out, fire)
		slices.SortFunc(out, func(a, b cron.Fire) int { return a.At.Compare(b.At) })
	}
	return out
}

// outside records the slots older than the catch-up window skipped, the
// latest maxGapRecords of them, and counts the others.
func (pl *planner) outside(gap []cron.Fire) {
	keep := max(len(gap)-maxGapRecords, 0)
	if keep > 0 {
		pl.p.unrecorded, pl.p.first, pl.p.last = keep, gap[0].At, gap[keep-1].At
	}
	for _, g := range gap[keep:] {
		if !pl.cs.pruned(g, cron.Fire{}) {
			pl.add(step{fire: g, skip: ledger.StatusSkipped, reason: "missed: older than CatchUpWindow"})
		}
	}
}

// classify sorts the candidates into overlapped (came due during one of
// this claim's runs), missed (came due while the replica could not act)
// and due, and applies the policies.
func (pl *planner) classify(candidates []cron.Fire, fire cron.Fire) {
	cs, w := pl.cs, pl.job.window
	var missed, overlapped []cron.Fire
	for _, g := range candidates {
		switch {
		case cs.handled[g.At], cs.pruned(g, fire):
		case !cs.lostTo.IsZero() && !g.At.After(cs.lostTo) && !g.At.Equal(fire.At):
			pl.add(step{fire: g, skip: ledger.StatusSkipped, reason: reasonRecordLost})
		case !cs.runFrom.IsZero() && g.At.After(cs.runFrom) && !g.At.After(cs.runTo):
			overlapped = append(overlapped, g)
		case pl.now.Sub(g.At) > w.lateAfter(g.At), !g.At.After(cs.seen) && !g.At.Equal(fire.At):
			missed = append(missed, g)
		default:
			pl.add(step{fire: g})
		}
	}
	for _, s := range missedSteps(pl.job, missed) {
		pl.add(s)
	}
	for _, s := range overlapSteps(pl.job.Overlap, overlapped) {
		pl.add(s)
	}
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
			steps = append(steps, step{fire: g, skip: ledger.StatusMissed, reason: "missed: awaits an operator"})
		default:
			steps = append(steps, step{fire: g, skip: ledger.StatusSkipped, reason: "missed"})
		}
	}
	return steps
}

// overlapSteps applies the overlap policy to slots that came due during a
// run: all skipped under OverlapForbid, the latest run under the others.
func overlapSteps(policy OverlapPolicy, overlapped []cron.Fire) []step {
	steps := make([]step, 0, len(overlapped))
	for i, g := range overlapped {
		if policy != OverlapForbid && i == len(overlapped)-1 {
			steps = append(steps, step{fire: g})
			continue
		}
		steps = append(steps, step{fire: g, skip: ledger.StatusSkipped, reason: "overlap"})
	}
	return steps
}

// maxBackfill bounds how many slots one Backfill asks for (1000).
const maxBackfill = 1000

// pausedSlots lists the slots Resume(..., skipPaused true) records skipped: those a
// claim would catch up after the pause ends (after the ledger's last slot
// and its horizon, within CatchUpWindow, up to now), the latest
// maxGapRecords of them. Older ones need no record: the newest skip moves
// the ledger's Last past them. None when the ledger has no last slot (a
// claim then looks at its own fire only).
func pausedSlots(job *registered, st ledger.State, now time.Time) []cron.Fire {
	if st.Last.IsZero() {
		return nil
	}
	floor := st.Last
	if h := st.Horizon.Truncate(time.Second).Add(-time.Second); h.After(floor) {
		floor = h
	}
	if since := job.window.since(now); floor.Before(since) {
		floor = since.Add(-time.Second) // older ones no claim would run
	}
	fires := job.window.between(floor, now, 1<<16)
	return fires[max(len(fires)-maxGapRecords, 0):]
}
