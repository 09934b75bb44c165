package cron_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler/cron"
)

// The property test compares Next and Between with a brute-force reference
// that knows nothing of segments or calendar search: it walks real instants
// minute by minute, reads the local wall time with time.Time.In, and
// applies the DST rules literally ("was this wall time shown before?",
// "did the clock jump over a matching wall time here?").

// fieldChoice is one way to write a field, with the values it means. The
// reference matches on these sets, not on the parser's bits.
type fieldChoice struct {
	text string
	vals []int
	star bool // written as * or ? (robfig's star bit; matters for dom/dow)
}

func rng(lo, hi, step int) []int {
	var v []int
	for i := lo; i <= hi; i += step {
		v = append(v, i)
	}
	return v
}

var (
	secChoices = []fieldChoice{
		{"0", []int{0}, false}, {"30", []int{30}, false}, {"0,30", []int{0, 30}, false},
		{"*/20", rng(0, 59, 20), false}, {"15-16", []int{15, 16}, false},
	}
	minChoices = []fieldChoice{
		{"*", rng(0, 59, 1), true}, {"*/15", rng(0, 59, 15), false}, {"0", []int{0}, false},
		{"30", []int{30}, false}, {"0,30", []int{0, 30}, false}, {"5-10", rng(5, 10, 1), false},
		{"*/7", rng(0, 59, 7), false}, {"45", []int{45}, false}, {"59", []int{59}, false},
	}
	hourChoices = []fieldChoice{
		{"*", rng(0, 23, 1), true}, {"*/2", rng(0, 23, 2), false}, {"*/3", rng(0, 23, 3), false},
		{"0", []int{0}, false}, {"1", []int{1}, false}, {"2", []int{2}, false}, {"3", []int{3}, false},
		{"1-3", rng(1, 3, 1), false}, {"0-23", rng(0, 23, 1), false}, {"2,3", []int{2, 3}, false},
		{"23", []int{23}, false}, {"22-23", []int{22, 23}, false}, {"0,1", []int{0, 1}, false},
	}
	domChoices = []fieldChoice{
		{"*", rng(1, 31, 1), true}, {"?", rng(1, 31, 1), true}, {"*", rng(1, 31, 1), true},
		{"1", []int{1}, false}, {"8", []int{8}, false}, {"1-7", rng(1, 7, 1), false},
		{"*/2", rng(1, 31, 2), false}, {"29", []int{29}, false}, {"31", []int{31}, false},
		{"15-31", rng(15, 31, 1), false},
	}
	monthChoices = []fieldChoice{
		{"*", rng(1, 12, 1), true}, {"*", rng(1, 12, 1), true}, {"3", []int{3}, false},
		{"MAR,OCT,NOV", []int{3, 10, 11}, false}, {"*/2", rng(1, 12, 2), false},
		{"4", []int{4}, false}, {"1-6", rng(1, 6, 1), false}, {"9-12", rng(9, 12, 1), false},
	}
	dowChoices = []fieldChoice{
		{"*", rng(0, 6, 1), true}, {"*", rng(0, 6, 1), true}, {"?", rng(0, 6, 1), true},
		{"0", []int{0}, false}, {"1-5", rng(1, 5, 1), false}, {"6", []int{6}, false},
		{"0,3", []int{0, 3}, false}, {"SUN", []int{0}, false},
	}
)

type refSpec struct {
	text                          string
	sec, min, hour, dom, mon, dow map[int]bool
	secList                       []int
	domStar, dowStar, wildcard    bool
	gapSkip, foldBoth             bool
}

func toSet(v []int) map[int]bool {
	m := make(map[int]bool, len(v))
	for _, x := range v {
		m[x] = true
	}
	return m
}

// randomSpec draws a spec. focusHour >= 0 aims it at a transition: a
// fixed time in that local hour on every day, so gaps and folds of
// fixed-time specs are exercised often.
func randomSpec(r *rand.Rand, focusHour int) refSpec {
	pick := func(c []fieldChoice) fieldChoice { return c[r.IntN(len(c))] }
	sec := fieldChoice{"0", []int{0}, false}
	withSeconds := r.IntN(4) == 0
	if withSeconds {
		sec = pick(secChoices)
	}
	// Calendar fields are mostly '*' so that transition days match often;
	// time fields are mostly fixed so that gaps and folds matter.
	pickStar := func(c []fieldChoice, p float64) fieldChoice {
		if r.Float64() < p {
			return c[0]
		}
		return pick(c)
	}
	mi, h := pickStar(minChoices, 0.1), pickStar(hourChoices, 0.1)
	dom, mon, dow := pickStar(domChoices, 0.6), pickStar(monthChoices, 0.7), pickStar(dowChoices, 0.6)
	if focusHour >= 0 {
		h = fieldChoice{fmt.Sprint(focusHour), []int{focusHour}, false}
		if r.IntN(2) == 0 {
			h = fieldChoice{fmt.Sprintf("%d,%d", focusHour, (focusHour+1)%24), []int{focusHour, (focusHour + 1) % 24}, false}
		}
		mi = minChoices[2+r.IntN(len(minChoices)-2)] // not '*', not '*/15'
		dom, mon, dow = domChoices[0], monthChoices[0], dowChoices[0]
	}
	fields := []string{mi.text, h.text, dom.text, mon.text, dow.text}
	if withSeconds {
		fields = append([]string{sec.text}, fields...)
	}
	return refSpec{
		text: strings.Join(fields, " "),
		sec:  toSet(sec.vals), min: toSet(mi.vals), hour: toSet(h.vals),
		dom: toSet(dom.vals), mon: toSet(mon.vals), dow: toSet(dow.vals),
		secList: sec.vals, domStar: dom.star, dowStar: dow.star,
		wildcard: strings.HasPrefix(sec.text, "*") || strings.HasPrefix(mi.text, "*") || strings.HasPrefix(h.text, "*"),
		gapSkip:  r.IntN(4) == 0,
		foldBoth: r.IntN(4) == 0,
	}
}

// matches reads wall time w (local reading encoded as UTC seconds).
func (rs refSpec) matches(w int64) bool {
	t := time.Unix(w, 0).UTC()
	if !rs.sec[t.Second()] || !rs.min[t.Minute()] || !rs.hour[t.Hour()] || !rs.mon[int(t.Month())] {
		return false
	}
	d, wd := rs.dom[t.Day()], rs.dow[int(t.Weekday())]
	if rs.domStar || rs.dowStar {
		return d && wd
	}
	return d || wd
}

type refFire struct {
	at   int64
	rule cron.Rule
	date string
}

func offAt(loc *time.Location, u int64) int64 {
	_, off := time.Unix(u, 0).In(loc).Zone()
	return int64(off)
}

// reference lists the fires in (from, to]. It assumes offsets change on
// whole minutes, which holds for every zone after its LMT era.
func reference(rs refSpec, loc *time.Location, from, to int64) []refFire {
	// Every offset in use near the window, found by sampling.
	offSet := map[int64]bool{}
	for u := from - 3*86400; u <= to+3*86400; u += 900 {
		offSet[offAt(loc, u)] = true
	}
	shown := func(w, u int64, before bool) bool { // is wall w shown at another instant?
		for o := range offSet {
			if v := w - o; v != u && (v < u) == before && offAt(loc, v) == o {
				return true
			}
		}
		return false
	}
	date := func(w int64) string { return time.Unix(w, 0).UTC().Format(time.DateOnly) }

	var out []refFire
	start := from - from%60 - 60
	if from%60 < 0 {
		start -= 60
	}
	prev := offAt(loc, start-60)
	for m := start; m <= to; m += 60 {
		off := offAt(loc, m)
		gapFire := false
		if off > prev && !rs.wildcard && !rs.gapSkip {
			// The clock jumped from wall m+prev straight to m+off.
		scan:
			for gw := m + prev; gw < m+off; gw += 60 {
				for _, s := range rs.secList {
					if rs.matches(gw + int64(s)) {
						out = append(out, refFire{m, cron.RuleGapRunAfter, date(gw + int64(s))})
						gapFire = true
						break scan
					}
				}
			}
		}
		for _, s := range rs.secList {
			u := m + int64(s)
			w := u + off
			if !rs.matches(w) || (gapFire && u == m) {
				continue
			}
			before, after := shown(w, u, true), shown(w, u, false)
			if before && !rs.wildcard && !rs.foldBoth {
				continue
			}
			rule := cron.RuleNormal
			switch {
			case before:
				rule = cron.RuleFoldSecond
			case after:
				rule = cron.RuleFoldFirst
			}
			out = append(out, refFire{u, rule, date(w)})
		}
		prev = off
	}
	out = slices.DeleteFunc(out, func(f refFire) bool { return f.at <= from || f.at > to })
	if len(out) == 0 {
		return nil
	}
	return out
}

// transitions returns the zone's offset changes in [from, to).
func transitions(loc *time.Location, from, to time.Time) []time.Time {
	var out []time.Time
	for t := from; t.Before(to); {
		_, end := t.In(loc).ZoneBounds()
		if end.IsZero() || !end.Before(to) {
			break
		}
		out = append(out, end)
		t = end
	}
	return out
}

func TestNextMatchesBruteForce(t *testing.T) {
	t.Parallel()
	zones := []string{ny, berlin, lhi, havana, seoul, utcZone,
		"Antarctica/Troll",  // two-hour shift
		"Pacific/Apia",      // skipped 2011-12-30 entirely
		"Pacific/Chatham",   // +12:45 / +13:45
		"America/Santiago",  // transitions at local midnight
		"Europe/Dublin",     // negative DST in tzdata
		"Asia/Kolkata",      // +05:30, no DST
		"America/Sao_Paulo", // DST until 2019
	}
	r := rand.New(rand.NewPCG(20260308, 20261101))
	n := 2000
	if testing.Short() {
		n = 200
	}
	for i := range n {
		zone := zones[r.IntN(len(zones))]
		loc, err := time.LoadLocation(zone)
		require.NoError(t, err)
		focusHour := -1

		// Half the windows straddle a transition.
		// Most windows straddle a transition; the rest are anywhere.
		year := 2000 + r.IntN(36)
		from := time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(r.Int64N(365*24)) * time.Hour)
		to := from.Add(time.Duration(1+r.Int64N(48*3600)) * time.Second)
		if zone == "Pacific/Apia" && r.IntN(3) == 0 {
			year = 2011 // the day it skipped: 2011-12-30
		}
		if tr := transitions(loc, time.Date(year, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(year+1, 1, 1, 0, 0, 0, 0, time.UTC)); len(tr) > 0 && r.IntN(4) != 0 {
			at := tr[r.IntN(len(tr))]
			from = at.Add(-time.Duration(1+r.Int64N(30*3600)) * time.Second)
			to = at.Add(time.Duration(r.Int64N(30*3600)) * time.Second)
			if r.IntN(2) == 0 { // the local hour the clock leaves at the transition
				_, prevOff := at.Add(-time.Second).In(loc).Zone()
				focusHour = at.Add(time.Duration(prevOff) * time.Second).UTC().Hour()
				if r.IntN(2) == 0 { // or the one it lands in
					focusHour = at.In(loc).Hour()
				}
			}
		}
		rs := randomSpec(r, focusHour)

		opts := cron.Options{Zone: zone}
		if rs.gapSkip {
			opts.Gap = cron.GapSkip
		}
		if rs.foldBoth {
			opts.Fold = cron.FoldBoth
		}
		name := fmt.Sprintf("case %d: %q %+v (%s, %s]", i, rs.text, opts, from.UTC().Format(time.RFC3339), to.UTC().Format(time.RFC3339))
		s, err := cron.Parse(rs.text, opts)
		require.NoError(t, err, name)
		require.Equal(t, rs.wildcard, s.Wildcard(), name)

		want := reference(rs, loc, from.Unix(), to.Unix())
		var got []refFire
		for _, f := range s.Between(from, to, 100000) {
			got = append(got, refFire{f.At.Unix(), f.Rule, f.BusinessDate})
		}
		require.Equal(t, want, got, name)

		// Next from random points inside the window, with sub-second parts.
		for range 5 {
			after := from.Add(time.Duration(r.Int64N(int64(to.Sub(from)))))
			f, ok := s.Next(after)
			idx := slices.IndexFunc(want, func(w refFire) bool { return w.at > after.Unix() })
			if idx < 0 {
				require.True(t, !ok || f.At.After(to), "%s: after %s got %v", name, after, f.At)
				continue
			}
			require.True(t, ok, name)
			require.Equal(t, want[idx], refFire{f.At.Unix(), f.Rule, f.BusinessDate}, "%s: after %s", name, after)
		}
	}
}
