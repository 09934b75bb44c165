package prunecutoff_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/luascript"
	"github.com/holdfast-go/holdfast/internal/prunecutoff"
	"github.com/holdfast-go/holdfast/internal/redistest"
)

// check is the smallest script with the prelude: "ok" when the cutoff
// passes, TIME's reply when it is refused.
var check = luascript.New(prunecutoff.Lua, `
return holdfast_prune_cutoff_refused(ARGV[1], ARGV[2], ARGV[3]) or 'ok'
`)

func runCheck(t *testing.T, rdb redis.UniversalClient, seconds int64, micros, margin string) any {
	t.Helper()
	res, err := check.Run(t.Context(), rdb, nil, strconv.FormatInt(seconds, 10), micros, margin).Result()
	require.NoError(t, err)
	return res
}

// On a miniredis whose clock is set, the limit is exact to the
// microsecond: a cutoff at the clock minus the margin passes, one
// microsecond later is refused with the clock, which Refused makes the
// error fence.CheckPruneCutoff gives.
func TestLuaLimitIsTheServersClockMinusTheMargin(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	now := time.Date(2020, 1, 2, 3, 4, 5, 678_901_000, time.UTC) // far from the caller's clock
	mr.SetTime(now)
	limit := now.Add(-fence.PruneMargin)

	require.Equal(t, "ok", runCheck(t, rdb, limit.Unix(), prunecutoff.Micros(limit), prunecutoff.Margin))
	late := limit.Add(time.Microsecond)
	res := runCheck(t, rdb, late.Unix(), prunecutoff.Micros(late), prunecutoff.Margin)
	reply, ok := res.([]any)
	require.True(t, ok, "%v", res)
	ce, err := prunecutoff.Refused(late, reply)
	require.NoError(t, err)
	require.Equal(t, fence.CheckPruneCutoff(late, now), error(ce))
	require.Equal(t, fence.PruneCutoffError{Before: late, Limit: limit, Now: now, Margin: fence.PruneMargin}, *ce)

	// The caller's clock plays no part: a cutoff an hour and more behind
	// it is refused by the server's, two years behind.
	old := time.Now().Add(-2 * fence.PruneMargin)
	require.IsType(t, []any{}, runCheck(t, rdb, old.Unix(), prunecutoff.Micros(old), prunecutoff.Margin))
	// Cutoffs far from any clock, where Lua numbers are inexact.
	require.IsType(t, []any{}, runCheck(t, rdb, 1<<62, "0", prunecutoff.Margin))
	require.Equal(t, "ok", runCheck(t, rdb, -1<<62, "999999", prunecutoff.Margin))
}

// On every backend, a cutoff in the future is refused and one older than
// the margin passes, by the server's clock.
func TestLuaOnEachBackend(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb := b.New(t)
			for _, c := range []struct {
				before time.Time
				ok     bool
			}{
				{time.Now().Add(time.Minute), false},
				{time.Now().Add(-fence.PruneMargin + time.Minute), false},
				{time.Now().Add(-fence.PruneMargin - time.Minute), true},
				{time.Unix(0, 0), true},
			} {
				res := runCheck(t, rdb, c.before.Unix(), prunecutoff.Micros(c.before), prunecutoff.Margin)
				if c.ok {
					require.Equal(t, "ok", res, "%v", c.before)
					continue
				}
				reply, ok := res.([]any)
				require.True(t, ok, "%v: %v", c.before, res)
				ce, err := prunecutoff.Refused(c.before, reply)
				require.NoError(t, err)
				require.WithinDuration(t, time.Now(), ce.Now, time.Minute, "the server's clock")
			}
		})
	}
}

func TestRefusedRejectsOtherReplies(t *testing.T) {
	t.Parallel()
	for _, reply := range [][]any{nil, {"1"}, {"1", "2", "3"}, {int64(1), "2"}, {"1", "1000000"}, {"1", "-1"}, {"x", "0"}} {
		_, err := prunecutoff.Refused(time.Now(), reply)
		require.Error(t, err, "%v", reply)
	}
}

// The SQL condition, in one transaction (now() fixed): a cutoff at now()
// minus the margin passes, a microsecond later does not; SQLCutoff keeps
// cutoffs of any year within timestamptz and decides as they do.
func TestSQLLimitIsNowMinusTheMargin(t *testing.T) {
	t.Parallel()
	pool := shared.Pool(t)
	ctx := t.Context()
	cond := "SELECT " + prunecutoff.SQL("$1", "$2")
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		var now time.Time
		require.NoError(t, tx.QueryRow(ctx, "SELECT now()").Scan(&now))
		passes := func(before time.Time) bool {
			t.Helper()
			var ok bool
			require.NoError(t, tx.QueryRow(ctx, cond, prunecutoff.SQLCutoff(before), fence.PruneMargin.Microseconds()).Scan(&ok))
			return ok
		}
		limit := now.Add(-fence.PruneMargin)
		require.True(t, passes(limit))
		require.True(t, passes(limit.Add(999*time.Nanosecond)), "compared at the microsecond")
		require.False(t, passes(limit.Add(time.Microsecond)))
		require.False(t, passes(now))
		require.False(t, passes(time.Unix(1<<62, 0)))
		require.False(t, passes(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)))
		require.True(t, passes(time.Unix(-1<<62, 0)))
		require.True(t, passes(time.Time{}))
		return nil
	}))
}
