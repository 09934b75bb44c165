package cron

import (
	"errors"
	"math/bits"
	"time"
)

// Fire is one scheduled run.
type Fire struct {
	// At is the instant to run, in UTC, at second precision.
	At time.Time
	// Local is At in the schedule's zone.
	Local time.Time
	// BusinessDate is the local date ("2006-01-02") of the scheduled wall
	// time. For a gap-shifted fire it is the date of the (earliest) wall
	// time that did not exist, which can differ from Local's date when
	// the gap spans midnight.
	BusinessDate string
	// Rule says how At was derived from the scheduled wall time.
	Rule Rule
}

const (
	secondsPerDay = 86400
	// maxAbsUnix bounds the instants Next works with (about 34,000 years
	// either side of 1970) so that no arithmetic below can overflow.
	maxAbsUnix = 1 << 40
)

var horizonSeconds = int64(Horizon / time.Second)

// Next returns the first fire strictly after `after`, compared at second
// precision (a fire at 09:00:00 is not after 09:00:00.5). ok is false when
// no fire exists within Horizon (Parse refuses a spec that never fires)
// or `after` is beyond the supported range. An @every spec always has a
// next fire.
func (s *Schedule) Next(after time.Time) (Fire, bool) {
	if s == nil {
		return Fire{}, false
	}
	a := after.Unix()
	if a >= maxAbsUnix || a < -maxAbsUnix {
		return Fire{}, false
	}
	at, wall, rule, ok := s.next(a)
	if !ok {
		return Fire{}, false
	}
	return s.fire(at, wall, rule), true
}

// Between returns the fires in (from, to], in order, at most max of them.
// It returns nil when max <= 0 or to is not after from.
func (s *Schedule) Between(from, to time.Time, max int) []Fire {
	if s == nil || max <= 0 {
		return nil
	}
	a, end := from.Unix(), to.Unix()
	if a >= maxAbsUnix || a < -maxAbsUnix {
		return nil
	}
	var out []Fire
	for len(out) < max && a < end {
		at, wall, rule, ok := s.next(a)
		if !ok || at > end {
			break
		}
		if out == nil {
			out = make([]Fire, 0, min(max, 64))
		}
		out = append(out, s.fire(at, wall, rule))
		a = at
	}
	return out
}

func (s *Schedule) fire(at, wall int64, rule Rule) Fire {
	u := time.Unix(at, 0).UTC()
	return Fire{At: u, Local: u.In(s.loc), BusinessDate: s.businessDate(wall), Rule: rule}
}

// businessDate is formatDate(wall), the last date's string reused.
func (s *Schedule) businessDate(wall int64) string {
	day := floorDiv(wall, secondsPerDay)
	if m := s.date.Load(); m != nil && m.day == day {
		return m.s
	}
	d := formatDate(wall)
	s.date.Store(&dateMemo{day: day, s: d})
	return d
}

// next returns the first fire instant > a, the wall time it stands for and
// its rule.
func (s *Schedule) next(a int64) (at, wall int64, rule Rule, ok bool) {
	if s.every > 0 {
		at = (floorDiv(a, s.every) + 1) * s.every
		return at, at + offsetAt(s.loc, at), RuleNormal, true
	}
	// Walk the real timeline segment by segment (constant offset each);
	// inside a segment, find the first matching wall time by calendar
	// fields. Fires therefore come out in real-time order, including the
	// second pass of an fold, which wall-time order would get wrong.
	limit := a + horizonSeconds
	for u := a + 1; u <= limit; {
		g := segmentAt(s.loc, u)
		// A gap opens exactly at g.start; its run-after fire is g.start,
		// which counts only if it is still ahead of a.
		if s.gap == GapRunAfter && u == g.start {
			if lo, hi, ok := g.gap(); ok {
				if w, ok := s.m.nextWall(lo, hi); ok {
					return g.start, w, RuleGapRunAfter, true
				}
			}
		}
		lo := u + g.off
		if s.fold == FoldFirst {
			if _, hi, ok := g.repeated(); ok && lo < hi {
				lo = hi // those wall times fired in the previous segment
			}
		}
		hi := limit + 1 + g.off
		if g.end != unbounded && g.end+g.off < hi {
			hi = g.end + g.off
		}
		if w, ok := s.m.nextWall(lo, hi); ok {
			return w - g.off, w, g.wallRule(s.loc, w), true
		}
		if g.end == unbounded {
			break
		}
		u = g.end
	}
	return 0, 0, 0, false
}

// matcher holds the spec's fields as bit sets (bit n set = value n
// matches), without robfig's star bit.
type matcher struct {
	sec, min, hour, dom, month, dow uint64
	// domDowAnd: day-of-month and day-of-week must both match (one of
	// them was written as * or ?); otherwise either may (the cron OR
	// rule). Same as robfig's dayMatches.
	domDowAnd bool
}

func (m *matcher) validate() error {
	switch {
	case m.sec&(1<<60-1) == 0, m.min&(1<<60-1) == 0, m.hour&(1<<24-1) == 0,
		m.dom&(1<<32-2) == 0, m.month&(1<<13-2) == 0, m.dow&(1<<7-1) == 0:
		return errors.New("a field matches no value")
	case m.domDowAnd && m.dow&(1<<7-1) == 1<<7-1 && !m.someDayExists():
		return errors.New("the day of month never occurs in the months given (the spec never fires)")
	}
	return nil
}

// someDayExists reports whether some day of the month field exists in some
// month of the month field (February counted with its 29th). Only then can
// a spec whose day of week is * fire.
func (m *matcher) someDayExists() bool {
	longest := [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
	for mo := 1; mo <= 12; mo++ {
		if m.month&(1<<mo) == 0 {
			continue
		}
		for d := 1; d <= longest[mo]; d++ {
			if m.dom&(1<<d) != 0 {
				return true
			}
		}
	}
	return false
}

func (m *matcher) dayMatches(dom int, wd int) bool {
	d := m.dom&(1<<uint(dom)) != 0
	w := m.dow&(1<<uint(wd)) != 0
	if m.domDowAnd {
		return d && w
	}
	return d || w
}

// nextWall returns the first wall time w in [lo, hi) matching every field.
// It steps over months, then days, then finds the time of day by bit
// search, so its cost is bounded by the days scanned, not the seconds.
func (m *matcher) nextWall(lo, hi int64) (int64, bool) {
	if lo >= hi {
		return 0, false
	}
	day := floorDiv(lo, secondsPerDay)
	sod := lo - day*secondsPerDay
	y, mo, d := civilFromDays(day)
	for day*secondsPerDay < hi {
		if m.month&(1<<uint(mo)) == 0 {
			if mo++; mo > 12 {
				mo, y = 1, y+1
			}
			d, sod = 1, 0
			day = daysFromCivil(y, mo, 1)
			continue
		}
		if m.dayMatches(d, weekday(day)) {
			if t, ok := m.timeOfDay(sod); ok {
				if w := day*secondsPerDay + t; w < hi {
					return w, true
				}
				return 0, false
			}
		}
		day, sod = day+1, 0
		if d++; d > daysIn(y, mo) {
			if d, mo = 1, mo+1; mo > 12 {
				mo, y = 1, y+1
			}
		}
	}
	return 0, false
}

// timeOfDay returns the first second of the day >= sod whose hour, minute
// and second match.
func (m *matcher) timeOfDay(sod int64) (int64, bool) {
	h, mi, s := int(sod/3600), int(sod/60%60), int(sod%60)
	for {
		nh, ok := nextBit(m.hour, h)
		if !ok {
			return 0, false
		}
		if nh > h {
			h, mi, s = nh, 0, 0
		}
		nm, ok := nextBit(m.min, mi)
		if !ok {
			h, mi, s = h+1, 0, 0
			continue
		}
		if nm > mi {
			mi, s = nm, 0
		}
		ns, ok := nextBit(m.sec, s)
		if !ok {
			mi, s = mi+1, 0
			if mi == 60 {
				h, mi = h+1, 0
			}
			continue
		}
		return int64(h*3600 + mi*60 + ns), true
	}
}

// nextBit returns the lowest set bit of b at position >= from.
func nextBit(b uint64, from int) (int, bool) {
	if from > 63 {
		return 0, false
	}
	b &= ^uint64(0) << uint(from)
	if b == 0 {
		return 0, false
	}
	return bits.TrailingZeros64(b), true
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// weekday of a day number (days since 1970-01-01, a Thursday); 0 = Sunday.
func weekday(day int64) int {
	return int((day%7 + 7 + 4) % 7)
}

func isLeap(y int64) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func daysIn(y int64, mo int) int {
	switch mo {
	case 2:
		if isLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// civilFromDays and daysFromCivil convert between days since 1970-01-01
// and a proleptic Gregorian date (H. Hinnant's algorithms).
func civilFromDays(z int64) (y int64, m, d int) {
	z += 719468
	era := floorDiv(z, 146097)
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = int(doy - (153*mp+2)/5 + 1)
	if mp < 10 {
		m = int(mp + 3)
	} else {
		m = int(mp - 9)
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

func daysFromCivil(y int64, m, d int) int64 {
	if m <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400
	mp := int64((m + 9) % 12)
	doy := (153*mp+2)/5 + int64(d) - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// formatDate renders the date of wall time w as "2006-01-02".
func formatDate(w int64) string {
	y, m, d := civilFromDays(floorDiv(w, secondsPerDay))
	if y < 0 || y > 9999 {
		return time.Unix(w, 0).UTC().Format(time.DateOnly)
	}
	var b [10]byte
	b[0], b[1], b[2], b[3] = byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10)
	b[4], b[7] = '-', '-'
	b[5], b[6] = byte('0'+m/10), byte('0'+m%10)
	b[8], b[9] = byte('0'+d/10), byte('0'+d%10)
	return string(b[:])
}
