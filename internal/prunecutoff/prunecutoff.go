// Package prunecutoff holds fence.CheckPruneCutoff for the two other media
// the sinks apply it in, inside the script or transaction that raises a
// slot-scope watermark (fence.SlotScopePruner), so that the store's clock
// decides, never the caller's: Lua on Redis (Lua, a prelude, with Micros,
// Margin and Refused) and SQL on PostgreSQL (SQL, with SQLCutoff).
package prunecutoff

import (
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/holdfast-go/holdfast/fence"
)

// Lua defines holdfast_prune_cutoff_refused(seconds, micros, margin) (see
// prunecutoff.lua). Put it among a script's preludes and return its reply
// when it is not nil, before the script writes anything.
//
//go:embed prunecutoff.lua
var Lua string

// Margin is fence.PruneMargin in microseconds, as a decimal: the margin
// argument of the Lua function.
var Margin = strconv.FormatInt(fence.PruneMargin.Microseconds(), 10)

// Micros returns the micros argument of the Lua function for before: its
// microseconds within the second before.Unix() (0 to 999999), so that the
// seconds argument is before.Unix() (or a value clamped far from now).
func Micros(before time.Time) string { return strconv.Itoa(before.Nanosecond() / 1000) }

// Refused returns the error of a script refused by the Lua function: reply
// is TIME's {seconds, microseconds}, the server's clock, and the error a
// *fence.PruneCutoffError for before with fence.PruneMargin. It returns an
// error of its own when reply is no such pair.
func Refused(before time.Time, reply []any) (*fence.PruneCutoffError, error) {
	if len(reply) != 2 {
		return nil, fmt.Errorf("a reply of %d elements where the server's clock (TIME) was expected", len(reply))
	}
	var parts [2]int64
	for i, v := range reply {
		s, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("the server's clock (TIME): %v (%T)", v, v)
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || (i == 1 && (n < 0 || n > 999_999)) {
			return nil, fmt.Errorf("the server's clock (TIME): %q", s)
		}
		parts[i] = n
	}
	now := time.Unix(parts[0], parts[1]*1000).UTC()
	return &fence.PruneCutoffError{Before: before, Limit: now.Add(-fence.PruneMargin), Now: now, Margin: fence.PruneMargin}, nil
}

// SQL returns the condition that a cutoff passes, for the statements of
// the transaction that raises the watermark: cutoff (a timestamptz
// parameter, SQLCutoff(before)) is at most now(), the transaction's start
// on the database's clock and so the same in each of its statements,
// minus margin (a bigint parameter, microseconds:
// fence.PruneMargin.Microseconds()).
func SQL(cutoff, margin string) string {
	return cutoff + "::timestamptz <= now() - " + margin + "::bigint * interval '1 microsecond'"
}

// The range SQLCutoff clamps to: within PostgreSQL's timestamptz, far on
// either side of any clock.
var (
	sqlMin = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	sqlMax = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
)

// SQLCutoff returns before as SQL's cutoff parameter: clamped to years 1 to
// 9999, which PostgreSQL's timestamptz holds and which decide as before
// does (a cutoff past 9999 is refused, one before year 1 passes), and
// compared at the microsecond (timestamptz's precision, truncated).
func SQLCutoff(before time.Time) time.Time {
	switch {
	case before.Before(sqlMin):
		return sqlMin
	case before.After(sqlMax):
		return sqlMax
	}
	return before
}
