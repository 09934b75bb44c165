package cron

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	rcron "github.com/robfig/cron/v3"

	"github.com/holdfast-go/holdfast/internal/errfamily"
)

// MaxSpecLen is the longest spec Parse accepts, in bytes.
const MaxSpecLen = 1024

// Horizon bounds the search of Next: when no fire exists within Horizon
// after the given instant, Next reports ok=false. Nine years, so that a
// leap-day spec (0 0 29 2 *) still finds 2104-02-29 from 2096-03-01.
const Horizon = 9 * 366 * 24 * time.Hour

// Errors returned by Parse, carried by a *ParseError.
var (
	// ErrInvalidSpec: the spec is empty, longer than MaxSpecLen, or
	// rejected by the cron parser (its message is kept in ParseError.Err).
	ErrInvalidSpec = errors.New("cron: invalid spec")
	// ErrUnknownZone: the zone named by Options.Zone or by a CRON_TZ=/TZ=
	// prefix is empty, "Local", or not in the tz database.
	ErrUnknownZone = errors.New("cron: unknown time zone")
	// ErrZoneConflict: Options.Zone and the spec's CRON_TZ=/TZ= prefix name
	// different zones (compared as strings: aliases conflict too).
	ErrZoneConflict = errors.New("cron: zone conflict between options and spec")
	// ErrInvalidOptions: Options.Gap or Options.Fold is out of range.
	ErrInvalidOptions = fmt.Errorf("cron: %w", errfamily.ErrInvalidOptions)
)

// ParseError is the error Parse returns. It matches its Kind (one of
// ErrInvalidSpec, ErrUnknownZone, ErrZoneConflict, ErrInvalidOptions) and
// its underlying Err with errors.Is / errors.As.
type ParseError struct {
	// Spec is the spec given to Parse, cut to 64 bytes.
	Spec string
	// Kind is the sentinel the error matches.
	Kind error
	// Msg says what is wrong, in words.
	Msg string
	// Err is the underlying error (the cron parser's or
	// time.LoadLocation's), or nil.
	Err error
}

// Error implements error.
func (e *ParseError) Error() string {
	msg := fmt.Sprintf("%v: %s (spec %q)", e.Kind, e.Msg, e.Spec)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns Kind and, when set, Err.
func (e *ParseError) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}

func parseErr(spec string, kind error, err error, format string, args ...any) *ParseError {
	const max = 64
	if len(spec) > max {
		spec = spec[:max] + "..."
	}
	return &ParseError{Spec: spec, Kind: kind, Msg: fmt.Sprintf(format, args...), Err: err}
}

// GapPolicy says what a fixed-time spec does when its wall time falls in a
// spring-forward gap (the wall time does not exist that day). Wildcard
// specs ignore it: they never fire inside a gap.
type GapPolicy int

const (
	// GapRunAfter (default) fires once at the first instant after the
	// gap, the transition instant; every matching wall time of one gap
	// coalesces into that single fire.
	GapRunAfter GapPolicy = iota
	// GapSkip does not fire for wall times in the gap.
	GapSkip
)

// String returns "run-after" or "skip".
func (p GapPolicy) String() string {
	switch p {
	case GapRunAfter:
		return "run-after"
	case GapSkip:
		return "skip"
	}
	return fmt.Sprintf("GapPolicy(%d)", int(p))
}

// FoldPolicy says what a fixed-time spec does when its wall time occurs
// twice in a fall-back fold. Wildcard specs ignore it: they fire in both
// passes.
type FoldPolicy int

const (
	// FoldFirst (default) fires once, at the first occurrence.
	FoldFirst FoldPolicy = iota
	// FoldBoth fires at both occurrences.
	FoldBoth
)

// String returns "first" or "both".
func (p FoldPolicy) String() string {
	switch p {
	case FoldFirst:
		return "first"
	case FoldBoth:
		return "both"
	}
	return fmt.Sprintf("FoldPolicy(%d)", int(p))
}

// Options configures Parse. The zero value means: UTC, GapRunAfter,
// FoldFirst.
type Options struct {
	// Zone is the IANA zone the spec's wall times are read in ("" = UTC).
	// A CRON_TZ= or TZ= prefix in the spec may name the zone instead; if
	// both are set they must be the same string (ErrZoneConflict
	// otherwise). "Local" is refused: replicas must agree on slots.
	Zone string
	// Gap applies to fixed-time specs only. Default GapRunAfter.
	Gap GapPolicy
	// Fold applies to fixed-time specs only. Default FoldFirst.
	Fold FoldPolicy
}

// Schedule is a parsed spec bound to a zone and DST policies. It is
// immutable and safe for concurrent use. Its methods are nil-safe.
type Schedule struct {
	spec     string
	loc      *time.Location
	every    int64 // seconds, > 0 for @every; the fields below are unused then
	wildcard bool
	gap      GapPolicy  // effective: GapSkip for wildcard specs
	fold     FoldPolicy // effective: FoldBoth for wildcard specs
	m        matcher
	// date is the business date last formatted (fire): the fires of a
	// schedule fall on few dates, and its users ask for the same fires
	// many times (each unit of a job, on each replica), so the string is
	// made once per date rather than per fire.
	date atomic.Pointer[dateMemo]
}

// dateMemo is a date and its "2006-01-02" form.
type dateMemo struct {
	day int64 // days since 1970-01-01
	s   string
}

// Spec returns the spec as given to Parse.
func (s *Schedule) Spec() string {
	if s == nil {
		return ""
	}
	return s.spec
}

// Zone returns the zone the spec's wall times are read in (UTC by default).
func (s *Schedule) Zone() *time.Location {
	if s == nil {
		return time.UTC
	}
	return s.loc
}

// Wildcard reports whether the spec follows the wall clock through DST
// transitions: its second, minute or hour field starts with '*' (or '?',
// which the parser treats as '*'), or it is @hourly. It is false for
// fixed-time specs and for @every.
func (s *Schedule) Wildcard() bool { return s != nil && s.wildcard }

// Interval returns the period of an @every spec (whole seconds, at least
// 1 s), or 0 for any other spec.
func (s *Schedule) Interval() time.Duration {
	if s == nil {
		return 0
	}
	return time.Duration(s.every) * time.Second
}

var parser = rcron.NewParser(rcron.SecondOptional | rcron.Minute | rcron.Hour |
	rcron.Dom | rcron.Month | rcron.Dow | rcron.Descriptor)

const (
	prefixCronTZ = "CRON_TZ="
	prefixTZ     = "TZ="
	starBit      = 1 << 63 // robfig's marker for a field written as * or ?
)

// Parse parses spec (5 fields, or 6 with a leading seconds field; a
// descriptor such as @daily; or @every <duration>, a whole number of
// seconds, at least 1 s), optionally prefixed by
// CRON_TZ=<zone> or TZ=<zone>. Errors are *ParseError values matching
// ErrInvalidSpec, ErrUnknownZone, ErrZoneConflict or ErrInvalidOptions.
// Parse never panics.
func Parse(spec string, opts Options) (*Schedule, error) {
	if len(spec) > MaxSpecLen {
		return nil, parseErr(spec, ErrInvalidSpec, nil, "longer than %d bytes", MaxSpecLen)
	}
	if opts.Gap != GapRunAfter && opts.Gap != GapSkip {
		return nil, parseErr(spec, ErrInvalidOptions, nil, "unknown %v", opts.Gap)
	}
	if opts.Fold != FoldFirst && opts.Fold != FoldBoth {
		return nil, parseErr(spec, ErrInvalidOptions, nil, "unknown %v", opts.Fold)
	}
	body := strings.TrimSpace(spec)
	if body == "" {
		return nil, parseErr(spec, ErrInvalidSpec, nil, "empty")
	}

	zoneName := opts.Zone
	if p, ok := zonePrefix(body); ok {
		i := strings.IndexFunc(body, unicode.IsSpace)
		if i < 0 {
			return nil, parseErr(spec, ErrInvalidSpec, nil, "zone prefix without a schedule")
		}
		name := body[len(p):i]
		body = strings.TrimSpace(body[i:])
		if _, again := zonePrefix(body); again {
			return nil, parseErr(spec, ErrInvalidSpec, nil, "more than one zone prefix")
		}
		if name == "" {
			return nil, parseErr(spec, ErrUnknownZone, nil, "empty zone name after %s", p)
		}
		if opts.Zone != "" && opts.Zone != name {
			return nil, parseErr(spec, ErrZoneConflict, nil, "Options.Zone %q, spec prefix %q", opts.Zone, name)
		}
		zoneName = name
	}
	loc, err := loadZone(zoneName)
	if err != nil {
		return nil, parseErr(spec, ErrUnknownZone, err, "zone %q", zoneName)
	}

	s := &Schedule{spec: spec, loc: loc, gap: opts.Gap, fold: opts.Fold}
	if strings.HasPrefix(body, "@every ") {
		d, err := time.ParseDuration(strings.TrimSpace(body[len("@every "):]))
		if err != nil {
			return nil, parseErr(spec, ErrInvalidSpec, err, "bad @every duration")
		}
		if d <= 0 {
			return nil, parseErr(spec, ErrInvalidSpec, nil, "@every duration must be positive")
		}
		// Slots are whole seconds: a sub-second or fractional interval
		// cannot be honoured, and rounding it would run at another one.
		if d%time.Second != 0 {
			return nil, parseErr(spec, ErrInvalidSpec, nil, "@every %v is not a whole number of seconds (slots are whole seconds)", d)
		}
		s.every = int64(d / time.Second)
		return s, nil
	}

	parsed, err := safeParse(body)
	if err != nil {
		return nil, parseErr(spec, ErrInvalidSpec, err, "parse")
	}
	ss, ok := parsed.(*rcron.SpecSchedule)
	if !ok { // @every is handled above; anything else is a parser change
		return nil, parseErr(spec, ErrInvalidSpec, nil, "unsupported schedule type %T", parsed)
	}
	s.m = matcher{
		sec: ss.Second &^ starBit, min: ss.Minute &^ starBit, hour: ss.Hour &^ starBit,
		dom: ss.Dom &^ starBit, month: ss.Month &^ starBit, dow: ss.Dow &^ starBit,
		domDowAnd: ss.Dom&starBit != 0 || ss.Dow&starBit != 0,
	}
	if err := s.m.validate(); err != nil {
		return nil, parseErr(spec, ErrInvalidSpec, nil, "%v", err)
	}
	s.wildcard = isWildcard(body)
	if s.wildcard {
		// Following the wall clock is exactly "skip the gap, fire in both
		// passes of the fold"; the enumeration needs nothing else.
		s.gap, s.fold = GapSkip, FoldBoth
	}
	return s, nil
}

func zonePrefix(s string) (string, bool) {
	for _, p := range [...]string{prefixCronTZ, prefixTZ} {
		if strings.HasPrefix(s, p) {
			return p, true
		}
	}
	return "", false
}

// loadZone resolves an IANA name. "" is UTC; "Local" is refused because it
// differs between machines and slots must not.
func loadZone(name string) (*time.Location, error) {
	switch name {
	case "":
		return time.UTC, nil
	case "Local":
		return nil, errors.New(`"Local" depends on the machine`)
	}
	return time.LoadLocation(name)
}

// safeParse calls the robfig parser and turns a panic into an error: the
// parser has panicked on inputs it did not expect (a TZ= prefix without a
// space), and Parse promises never to panic.
func safeParse(body string) (sched rcron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			sched, err = nil, fmt.Errorf("parser panic: %v", r)
		}
	}()
	return parser.Parse(body)
}

// isWildcard applies ISC cron's rule: a spec is wildcard when its second,
// minute or hour field starts with '*' ('?' counts: the parser reads it as
// '*'). Of the descriptors only @hourly is. body has already parsed, so
// its field count is 5 or 6.
func isWildcard(body string) bool {
	if strings.HasPrefix(body, "@") {
		return body == "@hourly"
	}
	f := strings.Fields(body)
	if len(f) == 5 { // no seconds field: it is "0"
		f = f[:2]
	} else {
		f = f[:3]
	}
	for _, v := range f {
		if strings.HasPrefix(v, "*") || strings.HasPrefix(v, "?") {
			return true
		}
	}
	return false
}
