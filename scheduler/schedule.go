package scheduler

import (
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/scheduler/cron"
)

// window is a job's schedule inside its bounds: the one place StartAt,
// EndAt and CatchUpWindow are applied. A slot exists when the cron
// schedule fires at it, at or after StartAt and before EndAt.
type window struct {
	sched      *cron.Schedule
	start, end time.Time     // zero: unbounded
	catchUp    time.Duration // how far back a claim runs slots late
}

// beforeStart and beforeEnd are the instants the schedule's bounds are
// asked from: the schedule compares at second precision (cron.Schedule.Next
// and Between floor to the second), and t less a nanosecond floors to the
// last whole second before t, so the fires after beforeStart are those at
// or after StartAt and the fires up to beforeEnd those before EndAt, for
// bounds on whole seconds or not. (Less a second, a StartAt of 05.4 s would
// let the fire at 05 s in, and an EndAt of 06.4 s shut the one at 06 s out.)
func (w window) beforeStart() time.Time { return w.start.Add(-time.Nanosecond) }
func (w window) beforeEnd() time.Time   { return w.end.Add(-time.Nanosecond) }

func newWindow(sched *cron.Schedule, job Job) window {
	return window{sched: sched, start: job.StartAt, end: job.EndAt, catchUp: job.CatchUpWindow}
}

// has reports whether the job has a slot at at (given that the cron
// schedule fires there): within [start, end).
func (w window) has(at time.Time) bool {
	return (w.start.IsZero() || !at.Before(w.start)) && (w.end.IsZero() || at.Before(w.end))
}

// refuse returns ErrInvalidArgument wrapped when at (whole seconds) is
// outside [start, end): the job has no slot there, and a slot asked for
// there would stay pending for ever (the planner never runs it).
func (w window) refuse(at time.Time) error {
	switch {
	case !w.start.IsZero() && at.Before(w.start):
		return fmt.Errorf("%w: %s is before the job's StartAt (it has not started; %s)", ErrInvalidArgument, at.Format(time.RFC3339), w.bounds())
	case !w.end.IsZero() && !at.Before(w.end):
		return fmt.Errorf("%w: %s is at or after the job's EndAt (it has ended; %s)", ErrInvalidArgument, at.Format(time.RFC3339), w.bounds())
	}
	return nil
}

// bounds describes the window for errors: "slots in [start, end)".
func (w window) bounds() string {
	start, end := "-inf", "+inf"
	if !w.start.IsZero() {
		start = w.start.UTC().Format(time.RFC3339Nano)
	}
	if !w.end.IsZero() {
		end = w.end.UTC().Format(time.RFC3339Nano)
	}
	return "slots in [" + start + ", " + end + ")"
}

// next returns the first slot strictly after t.
func (w window) next(t time.Time) (cron.Fire, bool) {
	if !w.start.IsZero() && t.Before(w.start) {
		t = w.beforeStart()
	}
	fire, ok := w.sched.Next(t)
	if !ok || !w.has(fire.At) {
		return cron.Fire{}, false
	}
	return fire, true
}

// between returns the slots in (from, to], oldest first, at most most.
func (w window) between(from, to time.Time, most int) []cron.Fire {
	if !w.start.IsZero() && from.Before(w.start) {
		from = w.beforeStart()
	}
	if !w.end.IsZero() && !to.Before(w.end) {
		to = w.beforeEnd()
	}
	if !to.After(from) {
		return nil
	}
	return w.sched.Between(from, to, most)
}

// latest returns the latest slot at or before t, looking no further back
// than after (exclusive).
func (w window) latest(after, t time.Time) (cron.Fire, bool) {
	var last cron.Fire
	found := false
	for f, ok := w.next(after); ok && !f.At.After(t); f, ok = w.next(f.At) {
		last, found = f, true
	}
	return last, found
}

// since is the oldest slot time a claim at now runs late: now minus
// CatchUpWindow, not before StartAt.
func (w window) since(now time.Time) time.Time {
	since := now.Add(-w.catchUp)
	if w.start.After(since) {
		since = w.start
	}
	return since
}

// interval is the time from the slot at at to the next one (0: none).
func (w window) interval(at time.Time) time.Duration {
	next, ok := w.sched.Next(at)
	if !ok {
		return 0
	}
	return next.At.Sub(at)
}

// fireAt rebuilds the Fire of a slot instant read back from the ledger.
func (w window) fireAt(at time.Time) cron.Fire {
	if f, ok := w.sched.Next(at.Add(-time.Second)); ok && f.At.Equal(at) {
		return f
	}
	local := at.In(w.sched.Zone())
	return cron.Fire{At: at, Local: local, BusinessDate: local.Format(time.DateOnly)}
}

// isSlot reports whether at (whole seconds) is a slot of the schedule.
func (w window) isSlot(at time.Time) bool {
	f, ok := w.sched.Next(at.Add(-time.Second))
	return ok && f.At.Equal(at)
}

// noFire stands for "no earlier fire" in prev.
var noFire = time.Unix(0, 0).UTC()

// prev returns the latest slot before at (noFire when the job has none,
// from StartAt on), looking back twice the gap from at to the next fire:
// enough for any evenly spaced schedule. It returns zero (unknown: the
// claim plans with State) when that finds none on an uneven one.
func (w window) prev(at time.Time) time.Time {
	next, ok := w.sched.Next(at)
	if !ok {
		return time.Time{}
	}
	from := at.Add(-2 * next.At.Sub(at))
	bounded := !w.start.IsZero() && !from.After(w.start)
	if bounded {
		from = w.beforeStart() // Between excludes from
	}
	const most = 1 << 10
	fires := w.sched.Between(from, at.Add(-time.Second), most)
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

type registered struct {
	Job
	window window
}
