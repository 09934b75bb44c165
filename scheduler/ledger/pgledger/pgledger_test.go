package pgledger_test

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/ledgertest"
	"github.com/holdfast-go/holdfast/scheduler/ledger/pgledger"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// TestConformance runs the ledger contract once per isolation level a
// database may default to (pgtest.Isolations, set as
// default_transaction_isolation on the ledger's connections).
func TestConformance(t *testing.T) {
	t.Parallel()
	pgtest.EachIsolation(t, func(t *testing.T, iso string) {
		ledgertest.Exercise(t, func(t *testing.T) ledger.Ledger { return newLedgerOn(t, shared.PoolAt(t, iso)) })
	})
}

// TestConformanceSharedSchema runs the suite with every subtest on one
// ledger, as replicas share one in production.
func TestConformanceSharedSchema(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	ledgertest.Exercise(t, func(*testing.T) ledger.Ledger { return l })
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	for _, schema := range []string{"Holdfast", "1x", "a-b", "x;drop", strings.Repeat("s", 64)} {
		_, err := pgledger.New(pool, pgledger.Options{Schema: schema})
		require.ErrorIs(t, err, pgledger.ErrInvalidOptions, "schema %q", schema)
	}
	_, err := pgledger.New(nil, pgledger.Options{})
	require.ErrorIs(t, err, pgledger.ErrInvalidOptions, "nil DB")
	var nilPool *pgxpool.Pool // issue 11: accepted, and failed at the first call
	_, err = pgledger.New(nilPool, pgledger.Options{})
	require.ErrorIs(t, err, pgledger.ErrInvalidOptions, "typed-nil *pgxpool.Pool")

	var zero *pgledger.Ledger
	require.ErrorIs(t, zero.Migrate(t.Context()), pgledger.ErrNotCreated)
	_, err = zero.State(t.Context(), "job", "", time.Time{}, time.Now())
	require.ErrorIs(t, err, pgledger.ErrNotCreated)
}

// Replicas migrate at start-up, all at once, into a schema that does not
// exist yet, beside pgfence migrating into the same schema: they take turns
// on one advisory lock instead of racing on the catalogs.
func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
	pgtest.EachIsolation(t, func(t *testing.T, iso string) {
		testMigrateConcurrently(t, shared.PoolAt(t, iso))
	})
}

func testMigrateConcurrently(t *testing.T, pool *pgxpool.Pool) {
	schema := newSchema(t)
	const migrators = 8
	var wg sync.WaitGroup
	errs := make([]error, 2*migrators)
	for i := range migrators {
		wg.Go(func() {
			l, err := pgledger.New(pool, pgledger.Options{Schema: schema})
			if err == nil {
				err = l.Migrate(t.Context())
			}
			errs[i] = err
		})
		wg.Go(func() {
			g, err := pgfence.New(pgfence.Options{Schema: schema})
			if err == nil {
				err = g.Migrate(t.Context(), pool)
			}
			errs[migrators+i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	l, err := pgledger.New(pool, pgledger.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, l.Migrate(t.Context()), "again")
	_, err = l.State(t.Context(), "settle", "", time.Time{}, time.Now())
	require.NoError(t, err)
}

// The tables are the documented ones, with their unique keys: other tools
// (audits, dashboards, retention jobs) read them.
func TestTables(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := newSchema(t)
	l, err := pgledger.New(pool, pgledger.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, l.Migrate(t.Context()))

	rows, err := pool.Query(t.Context(), `
SELECT c.conrelid::regclass::text, pg_get_constraintdef(c.oid)
  FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
 WHERE n.nspname = $1 AND c.contype IN ('u', 'p', 'f')`, schema)
	require.NoError(t, err)
	defs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var table, def string
		err := r.Scan(&table, &def)
		return table[strings.LastIndex(table, ".")+1:] + " " + def, err
	})
	require.NoError(t, err)
	require.Subset(t, defs, []string{
		"job_runs UNIQUE (job_name, schedule_slot, partition_key)",
		"job_run_attempts UNIQUE (job_run_id, attempt)",
		"job_fences PRIMARY KEY (job_name, partition_key)",
		"job_slot_fences PRIMARY KEY (job_name, partition_key, schedule_slot)",
		"job_pauses PRIMARY KEY (job_name)",
	})
	var fk bool
	for _, d := range defs {
		fk = fk || strings.HasPrefix(d, "job_run_attempts FOREIGN KEY (job_run_id) REFERENCES")
	}
	require.True(t, fk, "job_run_attempts references job_runs: %v", defs)
}

func TestInvalidArguments(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	ctx := t.Context()
	at := time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)
	slot := ledger.Slot{Job: "settle", At: at}
	ok := ledger.Fence{Scope: ledger.UnitScope(slot.Job, slot.Partition), Token: ledgertest.TokenBase, Owner: "a"}

	_, _, err := l.Begin(ctx, slot, ledger.Fence{Scope: ledger.UnitScope(slot.Job, slot.Partition), Owner: "a"}, 3, at)
	require.ErrorIs(t, err, fence.ErrNoToken)
	for name, call := range map[string]func() error{
		"empty job": func() error { _, _, err := l.Begin(ctx, ledger.Slot{At: at}, ok, 3, at); return err },
		"long job": func() error {
			_, _, err := l.Begin(ctx, ledger.Slot{Job: strings.Repeat("j", ledger.MaxJobNameLen+1), At: at}, ok, 3, at)
			return err
		},
		"partition longer than ledger.MaxPartitionLen": func() error {
			_, err := l.State(ctx, "settle", strings.Repeat("p", ledger.MaxPartitionLen+1), at, time.Now())
			return err
		},
		"NUL in partition": func() error {
			_, err := l.State(ctx, "settle", "eu\x00", at, time.Now())
			return err
		},
		"empty owner": func() error {
			_, _, err := l.Begin(ctx, slot, ledger.Fence{Scope: ledger.UnitScope(slot.Job, slot.Partition), Token: ok.Token}, 3, at)
			return err
		},
		"token above bigint": func() error {
			_, _, err := l.Begin(ctx, slot, ledger.Fence{Scope: ledger.UnitScope(slot.Job, slot.Partition), Token: math.MaxInt64 + 1, Owner: "a"}, 3, at)
			return err
		},
		"maxAttempts 0": func() error { _, _, err := l.Begin(ctx, slot, ok, 0, at); return err },
		"attempt 0":     func() error { return l.Heartbeat(ctx, slot, ok, 0, at) },
		"finish running": func() error {
			return l.Finish(ctx, slot, ok, 1, ledger.Outcome{Status: ledger.StatusRunning}, at)
		},
		"skip as pending": func() error { return l.Skip(ctx, slot, ok, ledger.StatusPending, "", at) },
		"list limit 0": func() error {
			_, err := l.List(ctx, "settle", "", at, at.Add(time.Hour), 0)
			return err
		},
	} {
		require.ErrorIs(t, call(), pgledger.ErrInvalidArgument, name)
	}
	_, err = l.State(ctx, "settle", strings.Repeat("p", ledger.MaxPartitionLen), at, time.Now())
	require.NoError(t, err, "a partition of ledger.MaxPartitionLen bytes")
	var nilCtx context.Context
	require.ErrorIs(t, l.Migrate(nilCtx), ledger.ErrNilContext) // the other methods: ledgertest's NilContext case
	_, found, err := l.Get(ctx, slot)
	require.NoError(t, err)
	require.False(t, found, "nothing was written")
}

// A job's error text is stored whatever bytes it holds, cut to MaxTextLen:
// Finish must not fail because of it.
func TestFinishStoresAnyErrorText(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	ctx := t.Context()
	at := time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)
	f := ledger.Fence{Scope: "settle", Token: ledgertest.TokenBase, Owner: "a"}
	for i, msg := range []string{"nul\x00byte", "bad \xff utf-8", strings.Repeat("é", pgledger.MaxTextLen)} {
		slot := ledger.Slot{Job: "settle", At: at.Add(time.Duration(i) * time.Minute)}
		n, _, err := l.Begin(ctx, slot, f, 3, at)
		require.NoError(t, err)
		require.NoError(t, l.Finish(ctx, slot, f, n, ledger.Outcome{
			Status: ledger.StatusFailed, Class: ledger.ClassPanic, Error: msg,
		}, at))
		rec, _, err := l.Get(ctx, slot)
		require.NoError(t, err)
		stored := rec.Attempts[0].Error
		require.LessOrEqual(t, len(stored), pgledger.MaxTextLen)
		require.NotEmpty(t, stored)
	}
}

// A Finish repeated after a lost reply is accepted; a different outcome for
// the same ended attempt is not.
func TestFinishRepeatedIsIdempotent(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	ctx := t.Context()
	at := time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)
	slot := ledger.Slot{Job: "settle", At: at}
	f := ledger.Fence{Scope: ledger.UnitScope(slot.Job, slot.Partition), Token: ledgertest.TokenBase, Owner: "a"}
	n, _, err := l.Begin(ctx, slot, f, 3, at)
	require.NoError(t, err)
	again, _, err := l.Begin(ctx, slot, f, 3, at.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, n, again, "Begin repeated by the same owner returns the running attempt")

	ok := ledger.Outcome{Status: ledger.StatusSucceeded}
	require.NoError(t, l.Finish(ctx, slot, f, n, ok, at.Add(2*time.Second)))
	require.NoError(t, l.Finish(ctx, slot, f, n, ok, at.Add(3*time.Second)))
	err = l.Finish(ctx, slot, f, n, ledger.Outcome{Status: ledger.StatusFailed}, at.Add(4*time.Second))
	require.ErrorIs(t, err, fence.ErrStaleToken)
	err = l.Heartbeat(ctx, slot, f, n, at.Add(5*time.Second))
	require.ErrorIs(t, err, fence.ErrStaleToken, "heartbeat of an ended attempt")

	rec, _, err := l.Get(ctx, slot)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusSucceeded, rec.Status)
	require.Equal(t, at.Add(2*time.Second), rec.Attempts[0].Finished)
}

// A taken-over slot whose attempts are spent is left abandoned, final.
func TestBeginExhaustedTakeoverLeavesAbandoned(t *testing.T) {
	t.Parallel()
	l := newLedger(t)
	ctx := t.Context()
	at := time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)
	slot := ledger.Slot{Job: "settle", At: at, Partition: "eu"}
	a := ledger.Fence{Scope: ledger.UnitScope(slot.Job, slot.Partition), Token: ledgertest.TokenBase + 1, Owner: "a"}
	b := ledger.Fence{Scope: ledger.UnitScope(slot.Job, slot.Partition), Token: ledgertest.TokenBase + 2, Owner: "b"}
	_, _, err := l.Begin(ctx, slot, a, 1, at)
	require.NoError(t, err)
	_, _, err = l.Begin(ctx, slot, b, 1, at.Add(time.Minute))
	require.ErrorIs(t, err, ledger.ErrSlotDone)

	rec, _, err := l.Get(ctx, slot)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusAbandoned, rec.Status)
	require.Equal(t, ledger.StatusAbandoned, rec.Attempts[0].Status)
	require.Equal(t, ledger.ClassInterrupted, rec.Attempts[0].Class)
	st, err := l.State(ctx, "settle", "eu", at, time.Now())
	require.NoError(t, err)
	require.Empty(t, st.Open)

	require.NoError(t, l.Request(ctx, slot, "ops", at.Add(2*time.Minute)))
	n, _, err := l.Begin(ctx, slot, b, 1, at.Add(3*time.Minute))
	require.NoError(t, err)
	require.Equal(t, 2, n)
}

// A per-slot fence is a job_slot_fences row: a per-slot write raises it and
// leaves the job_fences token at 0 (the row exists, for the horizon and the
// lock), and a refusal names the slot's fence, with the slot's token.
func TestPerSlotFenceIsARowOfItsOwn(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := newSchema(t)
	l, err := pgledger.New(pool, pgledger.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, l.Migrate(t.Context()))
	require.NoError(t, l.Migrate(t.Context()), "Migrate again, with job_slot_fences in place")
	ctx := t.Context()
	at := time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)
	slot := ledger.Slot{Job: "settle", At: at, Partition: "eu"}
	f := ledger.Fence{Scope: ledger.SlotScope(slot), Token: ledgertest.TokenBase + 7, Owner: "a"}
	_, _, err = l.Begin(ctx, slot, f, 3, at)
	require.NoError(t, err)

	var pairToken, slotToken int64
	var slotOwner string
	require.NoError(t, pool.QueryRow(ctx, `SELECT token FROM `+pgx.Identifier{schema, "job_fences"}.Sanitize()+
		` WHERE job_name = 'settle' AND partition_key = 'eu'`).Scan(&pairToken))
	require.Zero(t, pairToken, "the pair's token after a per-slot Begin")
	require.NoError(t, pool.QueryRow(ctx, `SELECT token, owner FROM `+pgx.Identifier{schema, "job_slot_fences"}.Sanitize()+
		` WHERE job_name = 'settle' AND partition_key = 'eu' AND schedule_slot = $1`, at).Scan(&slotToken, &slotOwner))
	require.Equal(t, int64(f.Token), slotToken)
	require.Equal(t, f.Owner, slotOwner)

	stale := ledger.Fence{Scope: f.Scope, Token: f.Token - 1, Owner: "b"}
	err = l.Heartbeat(ctx, slot, stale, 1, at.Add(time.Second))
	var se *fence.StaleTokenError
	require.ErrorAs(t, err, &se)
	require.Equal(t, "job_slot_fences(settle, eu, 2026-03-08T07:00:00Z)", se.Resource)
	require.Equal(t, f.Token, se.Current)
	require.Equal(t, stale.Token, se.Presented)

	// A pair-fenced write touches no slot's fence, and raises the pair's.
	pair := ledger.Fence{Scope: ledger.UnitScope(slot.Job, slot.Partition), Token: ledgertest.TokenBase + 1, Owner: "c"}
	_, _, err = l.Begin(ctx, ledger.Slot{Job: "settle", At: at.Add(time.Minute), Partition: "eu"}, pair, 3, at)
	require.NoError(t, err)
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, "job_slot_fences"}.Sanitize()).Scan(&rows))
	require.Equal(t, 1, rows, "job_slot_fences rows after a pair-fenced Begin")
	require.NoError(t, pool.QueryRow(ctx, `SELECT token FROM `+pgx.Identifier{schema, "job_fences"}.Sanitize()+
		` WHERE job_name = 'settle' AND partition_key = 'eu'`).Scan(&pairToken))
	require.Equal(t, int64(pair.Token), pairToken, "the pair's token after a pair-fenced Begin")
}

// TestQueryLogsNeverShowTheOwner: what pgx's tracelog logs of every
// statement (the arguments included) never holds an attempt's owner:
// begin, heartbeat, a failed attempt with a retry, the retry's begin and
// success, a skip, and a slot-scoped begin under its planner. The owners
// still reach the records.
func TestQueryLogsNeverShowTheOwner(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var logged *pgtest.Args
	l := newLedgerOn(t, pgtest.OwnPool(t, func(cfg *pgxpool.Config) { logged = pgtest.RecordArgs(cfg) }))
	now := time.Now().UTC().Truncate(time.Millisecond)
	at := now.Truncate(time.Second)
	slot := ledger.Slot{Job: "settle", Partition: "eu", At: at}
	first := ledger.Fence{Scope: ledger.UnitScope("settle", "eu"), Token: 10, Owner: "c4cf6eb9f6f86911b62410cefdeb973e", Holder: "vm"}
	second := ledger.Fence{Scope: first.Scope, Token: 11, Owner: "0f2b2d0e4c3a40c1a5e8f1d2c3b4a596", Holder: "vm"}
	skipper := ledger.Fence{Scope: first.Scope, Token: 12, Owner: "9d8c7b6a5f4e3d2c1b0a998877665544", Holder: "vm"}

	attempt, _, err := l.Begin(ctx, slot, first, 2, now)
	require.NoError(t, err)
	require.NoError(t, l.Heartbeat(ctx, slot, first, attempt, now))
	require.NoError(t, l.Finish(ctx, slot, first, attempt, ledger.Outcome{Status: ledger.StatusFailed, Error: "downstream unavailable",
		Class: ledger.ClassRetryable, RetryAt: now.Add(time.Millisecond)}, now))
	attempt, _, err = l.Begin(ctx, slot, second, 2, now.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, 2, attempt)
	require.NoError(t, l.Finish(ctx, slot, second, attempt, ledger.Outcome{Status: ledger.StatusSucceeded}, now.Add(time.Second)))
	require.NoError(t, l.Skip(ctx, ledger.Slot{Job: "settle", Partition: "eu", At: at.Add(time.Minute)}, skipper, ledger.StatusSkipped, "paused", now.Add(2*time.Second)))
	// A slot-scoped run (OverlapAllow) begun under its planner's unit
	// fence.
	allow := ledger.Slot{Job: "allow", At: at}
	planner := ledger.Fence{Scope: ledger.UnitScope("allow", ""), Token: 20, Owner: "5e4d3c2b1a09f8e7d6c5b4a392817065", Holder: "vm"}
	run := ledger.Fence{Scope: ledger.SlotScope(allow), Token: 21, Owner: "7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d", Holder: "vm", Planner: &planner}
	_, _, err = l.Begin(ctx, allow, run, 1, now)
	require.NoError(t, err)
	rec, found, err := l.Get(ctx, slot)
	require.NoError(t, err)
	require.True(t, found)
	require.Len(t, rec.Attempts, 2)
	require.Equal(t, []string{first.Owner, second.Owner}, []string{rec.Attempts[0].Owner, rec.Attempts[1].Owner}, "the owners reached the records")

	require.Empty(t, logged.Showing(first.Owner, second.Owner, skipper.Owner, planner.Owner, run.Owner), "a query log shows an owner")
	require.Greater(t, logged.Count(), 5)
	require.Contains(t, logged.String(), "[owner]")
}
