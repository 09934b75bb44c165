package cron

import (
	"fmt"
	"math"
	"time"
)

// Rule says how a Fire's instant was derived from its scheduled wall time.
type Rule uint8

const (
	// RuleNormal: the wall time occurs exactly once and fires then (and
	// every fire of an @every spec).
	RuleNormal Rule = iota
	// RuleGapRunAfter: a fixed-time wall time in a spring-forward gap,
	// fired at the transition instant (several coalesce into one fire).
	RuleGapRunAfter
	// RuleFoldFirst: the wall time occurs twice (fall-back fold);
	// this is the first occurrence.
	RuleFoldFirst
	// RuleFoldSecond: the second occurrence of an ambiguous wall time
	// (wildcard specs, or fixed-time specs with FoldBoth).
	RuleFoldSecond
)

// String returns "normal", "gap-run-after", "fold-first" or
// "fold-second".
func (r Rule) String() string {
	switch r {
	case RuleNormal:
		return "normal"
	case RuleGapRunAfter:
		return "gap-run-after"
	case RuleFoldFirst:
		return "fold-first"
	case RuleFoldSecond:
		return "fold-second"
	}
	return fmt.Sprintf("Rule(%d)", uint8(r))
}

// Instants and wall times are both int64 seconds. An instant is Unix time.
// A wall time is the local calendar reading encoded as if it were UTC
// (wall = instant + offset), so calendar arithmetic on it needs no zone.
// Nothing here ever asks time.Date to resolve a local reading: a wall time
// becomes an instant only inside a segment whose offset is known.

const (
	unbounded = math.MaxInt64 // segment end with no later transition
	noStart   = math.MinInt64 // segment start with no earlier transition
)

// segment is a stretch [start, end) of the real timeline over which the
// zone's UTC offset is constant. Inside it, wall time w resolves to the one
// instant w - off, provided start+off <= w < end+off.
type segment struct {
	start, end int64 // instants; noStart / unbounded at the ends of tzdata
	off        int64 // seconds east of UTC in [start, end)
	prevOff    int64 // offset just before start (== off when start == noStart)
}

// segmentAt returns the segment holding instant u, from the zone's own
// transition table (time.Time.ZoneBounds), never by resolving wall times.
func segmentAt(loc *time.Location, u int64) segment {
	t := time.Unix(u, 0).In(loc)
	_, off := t.Zone()
	s := segment{start: noStart, end: unbounded, off: int64(off), prevOff: int64(off)}
	start, end := t.ZoneBounds()
	if !start.IsZero() {
		s.start = start.Unix()
		s.prevOff = offsetAt(loc, s.start-1)
	}
	if !end.IsZero() {
		s.end = end.Unix()
	}
	return s
}

// offsetAt returns the zone's offset at instant u, in seconds.
func offsetAt(loc *time.Location, u int64) int64 {
	_, off := time.Unix(u, 0).In(loc).Zone()
	return int64(off)
}

// gap returns the wall times [lo, hi) skipped when the clock jumped forward
// at g.start. ok is false when the segment did not start with a jump
// forward.
func (g segment) gap() (lo, hi int64, ok bool) {
	if g.start == noStart || g.prevOff >= g.off {
		return 0, 0, false
	}
	return g.start + g.prevOff, g.start + g.off, true
}

// repeated returns the wall times [lo, hi) of this segment that the clock
// already showed before g.start (the second pass of a fall-back fold).
// ok is false when the segment did not start with a jump back.
//
// Only the previous segment is consulted: a wall time shown two or more
// transitions earlier (transitions closer together than their shift) is
// not treated as repeated. No tzdata zone does that within the last
// century.
func (g segment) repeated() (lo, hi int64, ok bool) {
	if g.start == noStart || g.prevOff <= g.off {
		return 0, 0, false
	}
	return g.start + g.off, g.start + g.prevOff, true
}

// wallRule classifies wall time w, which resolves inside segment g, as
// normal, first or second occurrence. The lookahead for a first
// occurrence costs one zone lookup, done only for wall times near the
// segment's end.
func (g segment) wallRule(loc *time.Location, w int64) Rule {
	if lo, hi, ok := g.repeated(); ok && w >= lo && w < hi {
		return RuleFoldSecond
	}
	const maxShift = 26 * 3600 // larger than any offset change in tzdata
	if g.end != unbounded && w-g.off >= g.end-maxShift {
		if next := offsetAt(loc, g.end); next < g.off && w >= g.end+next {
			return RuleFoldFirst
		}
	}
	return RuleNormal
}
