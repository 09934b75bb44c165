package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/pgledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// ledger prune --before <a time in the future>, or a duration shorter
// than ledger.PruneMargin, exits 2 with a message naming the cutoff and
// the limit, with and without --dry-run, and deletes nothing, on both
// ledgers.
func TestPruneRefusesACutoffOfSlotsThatMayStillRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	seed := func(t *testing.T, l ledger.Ledger) ledger.Slot {
		old := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
		f := ledger.Fence{Scope: ledger.UnitScope("settle", "eu"), Token: 7, Owner: "owner-a"}
		for i := range 2 { // slot 0 done, slot 1 the latest: slot 0 is prunable
			slot := ledger.Slot{Job: "settle", Partition: "eu", At: old.Add(time.Duration(i) * time.Minute)}
			n, _, err := l.Begin(ctx, slot, f, 3, slot.At)
			require.NoError(t, err)
			require.NoError(t, l.Finish(ctx, slot, f, n, ledger.Outcome{Status: ledger.StatusSucceeded}, slot.At.Add(time.Second)))
		}
		return ledger.Slot{Job: "settle", Partition: "eu", At: old}
	}
	check := func(t *testing.T, l ledger.Ledger, conn []string) {
		slot := seed(t, l)
		for _, before := range []string{"2999-01-01T00:00:00Z", "1s", "59m"} {
			for _, dry := range []bool{false, true} {
				args := append([]string{"ledger", "prune", "--before", before}, conn...)
				if dry {
					args = append(args, "--dry-run")
				}
				r := cli(t, args...)
				require.Equal(t, exitUsage, r.code, "holdfast %s\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.stdout, r.stderr)
				require.Empty(t, r.stdout, "nothing deleted, nothing listed")
				require.Contains(t, r.stderr, "prune cutoff")
				require.Contains(t, r.stderr, "is later than", "the message names the limit")
				if before == "2999-01-01T00:00:00Z" {
					require.Contains(t, r.stderr, before, "the message names the cutoff")
				}
				_, found, err := l.Get(ctx, slot)
				require.NoError(t, err)
				require.True(t, found, "a refused prune deletes nothing")
			}
		}
		// An hour and more back is a valid cutoff.
		out := ok(t, append([]string{"ledger", "prune", "--before", "61m"}, conn...)...)
		require.Contains(t, out, "deleted 1 slot record(s)")
	}

	t.Run("Redis", func(t *testing.T) {
		t.Parallel()
		rdb := redistest.Real(t)
		prefix := redistest.Prefix(t, rdb) + "ledger:"
		l, err := redisledger.New(rdb, redisledger.Options{Prefix: prefix})
		require.NoError(t, err)
		check(t, l, []string{"--redis", redistest.URL(), "--ledger-prefix", prefix})
	})
	t.Run("Postgres", func(t *testing.T) {
		t.Parallel()
		pool := shared.Pool(t)
		schema := shared.Schema(t, "cliprune")
		l, err := pgledger.New(pool, pgledger.Options{Schema: schema})
		require.NoError(t, err)
		require.NoError(t, l.Migrate(ctx))
		check(t, l, []string{"--pg", pgtest.URL(), "--schema", schema})
	})
}
