package compat_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/redislease"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
	"github.com/holdfast-go/holdfast/sinks/redisfence"
)

// steady is the workload of the growth tests: units (job, partition)
// each run one slot a minute under the unit's lease, record it in the
// ledger and write one resource through the sink; retention keeps the
// last keep slots (Prune after each round).
type steady struct {
	units, keep int
	start       time.Time
	// slotScoped writes the sink under each slot's own scope
	// (ledger.SlotScope, OverlapAllow's), and prunes the sink's slot
	// scopes at the ledger's cutoff with pruneSink.
	slotScoped bool
	pruneSink  func(resource, unit string, before time.Time)
}

func (w steady) resource(s ledger.Slot) string { return fmt.Sprintf("settlement:{%s}", s.Partition) }

func (w steady) slot(u, i int) ledger.Slot {
	return ledger.Slot{Job: "job", At: w.start.Add(time.Duration(i) * time.Minute), Partition: fmt.Sprintf("p%03d", u)}
}

// round runs slot i of every unit with acquire, begin, finish, write,
// release, then prunes what retention lets go.
func (w steady) round(t *testing.T, i int, leases leasedriver.Backend, l ledger.Ledger, write func(resource string, h fence.Holder)) {
	ctx := t.Context()
	for u := range w.units {
		s := w.slot(u, i)
		scope := ledger.UnitScope(s.Job, s.Partition)
		g, err := leases.Acquire(ctx, scope, "owner", time.Minute)
		require.NoError(t, err)
		require.True(t, g.Acquired)
		f := ledger.Fence{Scope: scope, Token: g.Token, Owner: "owner", Holder: "replica-1"}
		attempt, _, err := l.Begin(ctx, s, f, 3, s.At)
		require.NoError(t, err)
		require.NoError(t, l.Finish(ctx, s, f, attempt, ledger.Outcome{Status: ledger.StatusSucceeded}, s.At.Add(time.Second)))
		sinkScope := scope
		if w.slotScoped {
			sinkScope = ledger.SlotScope(s)
		}
		write(w.resource(s), fence.Holder{Scope: sinkScope, Token: g.Token, Owner: "owner"})
		require.NoError(t, leases.Release(ctx, leasedriver.Held{Name: scope, Owner: "owner", TTL: time.Minute, Handle: g.Handle}))
	}
	if i >= w.keep {
		cutoff := w.start.Add(time.Duration(i-w.keep+1) * time.Minute)
		_, err := l.(ledger.Pruner).Prune(ctx, cutoff)
		require.NoError(t, err)
		if w.slotScoped {
			for u := range w.units {
				s := w.slot(u, i)
				w.pruneSink(w.resource(s), ledger.UnitScope(s.Job, s.Partition), cutoff)
			}
		}
	}
}

// A steady workload leaves the Redis stores at a constant size once
// retention prunes: the same keys and about the same memory after 20 more
// slots per unit. It prints the bytes per unit (ledger, lease, sink) that
// docs/operations.md quotes.
func TestRedisGrowthIsBounded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	rdb := redisproc.Start(t).Client(t)
	leases, err := redislease.NewBackend(rdb, redislease.Options{})
	require.NoError(t, err)
	l, err := redisledger.New(rdb, redisledger.Options{})
	require.NoError(t, err)
	sink, err := redisfence.New(rdb)
	require.NoError(t, err)
	w := steady{units: 50, keep: 5, start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	write := func(resource string, h fence.Holder) { require.NoError(t, sink.Set(ctx, resource, "settled", h, 0)) }

	measure := func() (keys int64, bytes map[string]int64) {
		keys = rdb.DBSize(ctx).Val()
		bytes = map[string]int64{}
		for _, pattern := range []string{"holdfast:ledger:*", "holdfast:lease:*", "holdfast:redisfence:*", "settlement:*"} {
			iter := rdb.Scan(ctx, 0, pattern, 1000).Iterator()
			for iter.Next(ctx) {
				n, err := rdb.MemoryUsage(ctx, iter.Val()).Result()
				require.NoError(t, err)
				bytes[pattern] += n
			}
			require.NoError(t, iter.Err())
		}
		return keys, bytes
	}
	i := 0
	for ; i < 10; i++ {
		w.round(t, i, leases, l, write)
	}
	keys1, bytes1 := measure()
	for ; i < 30; i++ {
		w.round(t, i, leases, l, write)
	}
	keys2, bytes2 := measure()
	require.Equal(t, keys1, keys2, "the same keys after 20 more slots per unit")
	for p, b := range bytes1 {
		require.InDelta(t, b, bytes2[p], float64(b)/10, "%s: bytes within 10%%", p)
	}
	t.Logf("growth: redis units=%d kept_slots=%d keys=%d bytes_per_unit ledger=%d lease=%d sink_fence=%d",
		w.units, w.keep, keys2, bytes2["holdfast:ledger:*"]/int64(w.units), bytes2["holdfast:lease:*"]/int64(w.units),
		bytes2["holdfast:redisfence:*"]/int64(w.units))
}

// The same on Postgres: constant row counts once retention prunes, and the
// bytes per unit of each table.
//
// Under OverlapAllow (slotScoped) the guard keeps a row per slot scope,
// which pgfence.Guard.PruneSlotScopes, called at the ledger's cutoff,
// bounds; the table of closed slot scopes keeps one row per (resource,
// unit).
func TestPostgresGrowthIsBounded(t *testing.T) {
	t.Parallel()
	for _, slotScoped := range []bool{false, true} {
		t.Run(map[bool]string{false: "unit scopes", true: "slot scopes"}[slotScoped], func(t *testing.T) {
			t.Parallel()
			postgresGrowth(t, slotScoped)
		})
	}
}

func postgresGrowth(t *testing.T, slotScoped bool) {
	ctx := t.Context()
	pool := shared.Pool(t)
	schema := pgtest.Schema(t, pool, "compat_")
	st := pgStoresIn(t, pool, schema, "")
	leases, l, guard := st.leases, st.ledger, st.guard
	w := steady{units: 50, keep: 5, start: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), slotScoped: slotScoped,
		pruneSink: func(resource, unit string, before time.Time) {
			_, err := guard.PruneSlotScopes(ctx, pool, resource, unit, before)
			require.NoError(t, err)
		}}
	write := func(resource string, h fence.Holder) {
		require.NoError(t, pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
			return guard.Check(ctx, tx, resource, h)
		}))
	}
	tables := []string{"leases", "job_fences", "job_runs", "job_run_attempts", "job_slot_fences", pgfence.DefaultTable, pgfence.DefaultTable + pgfence.ClosedTableSuffix}
	measure := func() map[string][2]int64 {
		out := map[string][2]int64{}
		for _, table := range tables {
			var rows, bytes int64
			q := pgx.Identifier{schema, table}.Sanitize()
			require.NoError(t, pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(pg_column_size(t.*)), 0) FROM `+q+` t`).Scan(&rows, &bytes))
			out[table] = [2]int64{rows, bytes}
		}
		return out
	}
	i := 0
	for ; i < 10; i++ {
		w.round(t, i, leases, l, write)
	}
	before := measure()
	for ; i < 30; i++ {
		w.round(t, i, leases, l, write)
	}
	after := measure()
	for _, table := range tables {
		require.Equal(t, before[table][0], after[table][0], "%s: the same rows after 20 more slots per unit", table)
	}
	closed := after[pgfence.DefaultTable+pgfence.ClosedTableSuffix]
	if slotScoped {
		require.Equal(t, int64(w.units), closed[0], "one watermark row per (resource, unit)")
		require.Equal(t, int64(w.units*w.keep), after[pgfence.DefaultTable][0], "a guard row per kept slot and unit")
	} else {
		require.Zero(t, closed[0], "no watermark rows without slot scopes")
	}
	t.Logf("growth: postgres slot_scoped=%v units=%d kept_slots=%d rows_per_unit leases=%d job_fences=%d job_runs=%d job_run_attempts=%d guard=%d guard_closed=%d "+
		"row_bytes_per_unit leases=%d job_fences=%d job_runs=%d job_run_attempts=%d guard=%d guard_closed=%d",
		slotScoped, w.units, w.keep, after["leases"][0]/int64(w.units), after["job_fences"][0]/int64(w.units), after["job_runs"][0]/int64(w.units),
		after["job_run_attempts"][0]/int64(w.units), after[pgfence.DefaultTable][0]/int64(w.units), closed[0]/int64(w.units),
		after["leases"][1]/int64(w.units), after["job_fences"][1]/int64(w.units), after["job_runs"][1]/int64(w.units),
		after["job_run_attempts"][1]/int64(w.units), after[pgfence.DefaultTable][1]/int64(w.units), closed[1]/int64(w.units))
}
