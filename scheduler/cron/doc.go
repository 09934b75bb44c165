// Package cron turns a cron spec and an IANA time zone into the exact
// instants a job is due, including across daylight-saving transitions.
//
// Specs are parsed by github.com/robfig/cron/v3 (5 fields, or 6 with a
// leading seconds field; descriptors such as @daily; @every <duration>;
// an optional CRON_TZ=<zone> or TZ=<zone> prefix). The enumeration of fire
// instants and the DST rules are this package's own: robfig's Next builds
// instants with time.Date on local readings, which Go resolves differently
// per zone when the reading does not exist or exists twice.
//
// # Model
//
// A spec describes wall times: local calendar readings such as
// "2026-03-08 02:30:00". A Schedule maps each matching wall time to zero,
// one or two instants on the real (UTC) timeline, following the zone's
// transition table. Next and Between walk the real timeline one constant
// offset stretch at a time and search each stretch by calendar fields
// (month, day, hour, minute, second), so fires come out in real-time order
// and a call costs microseconds however sparse the spec. The zone's
// transitions are read from the tz database (time.Time.ZoneBounds); a local
// reading is never handed to time.Date.
//
// Each Fire carries the instant (At, UTC, whole seconds), the same instant
// in the zone (Local), the BusinessDate (the local date of the scheduled
// wall time) and the Rule that produced it. Two replicas that parse the
// same spec in the same zone, with the same tz database, compute the same
// fires whatever their own clock or time zone: this is what makes a fire
// usable as a slot identity.
//
// # DST: ISC/Vixie cron semantics
//
// A spec is wildcard when its second, minute or hour field starts with '*'
// (ISC cron's rule; '?' counts too because the parser reads it as '*'):
// "*/30 * * * *" and "0 * * * *" (hour is '*') and "0 */2 * * *" are
// wildcard; "30 2 * * *", "0 1-3 * * *" and "0 0-23 * * *" are fixed-time.
// Of the descriptors, @hourly is wildcard; @daily, @midnight, @weekly,
// @monthly, @yearly and @annually are fixed-time.
//
// Two DST terms: a gap is the local times a spring-forward transition
// skips; a fold is the local times a fall-back transition repeats (as
// Python's PEP 495 calls it). GapPolicy and FoldPolicy (FoldPolicy was
// OverlapPolicy before) say what a fixed-time spec does in each.
//
// A wildcard spec follows the real clock: every instant whose local
// reading matches fires. Nothing fires for readings inside a spring-forward
// gap (they do not exist) and readings inside a fall-back fold fire in
// both passes.
//
// A fixed-time spec is about a time of day, so by default (GapRunAfter,
// FoldFirst):
//
//   - a wall time in a spring-forward gap fires once, at the first instant
//     after the gap (the transition instant). Several matching wall times
//     in one gap coalesce into that one fire, also when the first reading
//     after the gap matches on its own.
//   - a wall time in a fall-back fold fires once, at its first
//     occurrence.
//
// Options.Gap = GapSkip drops gap wall times instead; Options.Fold =
// FoldBoth fires at both occurrences. Wildcard specs ignore both
// options: following the wall clock already means "skip" and "both".
//
// Examples in America/New_York, 2026 (spring forward 03-08 07:00Z, fall
// back 11-01 06:00Z):
//
//	30 2 * * *     2026-03-08: 07:00Z (03:00 EDT; 02:30 does not exist)
//	30 1 * * *     2026-11-01: 05:30Z only (01:30 EDT, not 01:30 EST)
//	*/30 * * * *   2026-11-01: 04:30Z 05:00Z 05:30Z 06:00Z 06:30Z 07:00Z
//	               (01:00 and 01:30 run in EDT and again in EST)
//	0 1-3 * * *    2026-03-08: 06:00Z, 07:00Z (02:00 and 03:00 coalesce)
//
// An @every spec is a constant interval on the real timeline anchored at
// the Unix epoch: it fires at every instant k*d (k an integer). d must be
// a whole number of seconds, at least 1 s: slots are whole seconds, so
// "@every 500ms" or "@every 1500ms" is refused (ErrInvalidSpec) rather than
// run at another interval. DST does not affect it.
//
// A spec that can never fire ("0 0 30 2 *", "0 0 31 4,6 *") is refused
// too (ErrInvalidSpec): a job on it would register and never run.
//
// # Fire.Rule
//
// RuleNormal: the wall time exists once (and every @every fire).
// RuleGapRunAfter: a fixed-time fire moved to the end of a gap; its
// BusinessDate is the date of the earliest coalesced wall time.
// RuleFoldFirst / RuleFoldSecond: the first / second occurrence of a
// wall time that occurs twice.
//
// Day of month and day of week follow robfig's (and Vixie's) rule: when
// either field is '*' or '?', both must match; when both are restricted,
// either may ("0 0 1 * MON" is the 1st and every Monday).
//
// # Not guaranteed
//
//   - Results depend on the tz database compiled into the binary or found
//     on the machine. Import time/tzdata (or pin ZONEINFO) so every replica
//     uses the same rules, and expect slots to move when a government
//     changes its zone's rules.
//   - Next looks Horizon (nine years) ahead; a spec with no fire in that
//     window ("0 0 30 2 *") reports ok=false.
//   - A wall time counts as repeated only against the stretch just before
//     the transition; zones whose transitions are closer together than
//     their shift (none in tzdata since the early 20th century) can see a
//     repeated reading fire twice under FoldFirst.
//   - Leap seconds do not exist here, as in package time.
package cron
