package compat_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/lease/pglease"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/pgledger"
	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore"
	"github.com/holdfast-go/holdfast/sinks/httpfence/pgstore"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// pgDump is the state of the Postgres stores in one schema: the tables'
// columns, constraints, indexes and comments (pgtest.Columns, the schema
// as SCHEMA), and every row of each table as JSON objects, in key order.
type pgDump struct {
	Schema []string                    `json:"schema"`
	Rows   map[string][]map[string]any `json:"rows"`
}

// pgTables are the tables of the four stores in a schema, in an order
// that keeps foreign keys satisfied on load.
var pgTables = []string{"leases", "job_fences", "job_slot_fences", "job_runs", "job_run_attempts", "job_pauses", pgfence.DefaultTable,
	pgfence.DefaultTable + pgfence.ClosedTableSuffix, "idempotency_keys"}

// pgWorkload writes, with the current code, one of everything the
// Postgres stores keep, in schema: a lease taken and released and one
// still held, a ledger slot run to success and a paused job, a guard row,
// a completed idempotency record. It returns the released lease's token.
func pgWorkload(t *testing.T, pool *pgxpool.Pool, schema string) fence.Token {
	ctx := t.Context()
	st := pgStoresIn(t, pool, schema, "replica-1")
	check := func(h fence.Holder) {
		require.NoError(t, pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
			return st.guard.Check(ctx, tx, "orders", h)
		}))
	}
	token := goldenWorkload(t, st.leases, st.ledger, st.idem, check)
	// Two slot scopes of one unit, the first pruned: a guard row of the
	// second, and the unit's watermark in the closed table.
	for _, slot := range []int64{goldenSlotScopeAt, goldenSlotScopeAt + 3600} {
		check(fence.Holder{Scope: fmt.Sprintf("%s@%d", goldenSlotUnit, slot), Token: 7, Owner: goldenOwner})
	}
	n, err := st.guard.PruneSlotScopes(ctx, pool, "orders", goldenSlotUnit, time.Unix(goldenSlotScopeAt+1, 0))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	return token
}

// The unit and first slot of the slot scopes the Postgres fixture holds.
const (
	goldenSlotUnit    = "settle|eu"
	goldenSlotScopeAt = int64(1796090400)
)

func dumpPostgres(t *testing.T, pool *pgxpool.Pool, schema string) pgDump {
	ctx := t.Context()
	d := pgDump{Schema: pgtest.Columns(t, pool, schema), Rows: map[string][]map[string]any{}}
	for _, table := range pgTables {
		q := pgx.Identifier{schema, table}.Sanitize()
		rows, err := pool.Query(ctx, `SELECT row_to_json(t)::text FROM `+q+` t ORDER BY row_to_json(t)::text`)
		require.NoError(t, err)
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		for _, text := range texts {
			var row map[string]any
			require.NoError(t, json.Unmarshal([]byte(text), &row))
			d.Rows[table] = append(d.Rows[table], row)
		}
	}
	return d
}

// restorePostgres migrates schema with the current code and loads the
// dump's rows, as a restore of a backup would (sequences past the ids).
// What lived when the fixture was written lives an hour from now (the
// fixture is older than its TTLs), as restoreRedis gives TTLs an hour.
func restorePostgres(t *testing.T, pool *pgxpool.Pool, schema string, d pgDump) {
	ctx := t.Context()
	pgStoresIn(t, pool, schema, "")
	for _, table := range pgTables {
		q := pgx.Identifier{schema, table}.Sanitize()
		for _, row := range d.Rows[table] {
			b, err := json.Marshal(row)
			require.NoError(t, err)
			_, err = pool.Exec(ctx, `INSERT INTO `+q+` SELECT * FROM json_populate_record(NULL::`+q+`, $1::json)`, string(b))
			require.NoError(t, err, "load a row of %s", table)
		}
	}
	for _, q := range []string{
		`UPDATE ` + pgx.Identifier{schema, "leases"}.Sanitize() + ` SET expires_at = now() + interval '1 hour' WHERE owner <> ''`,
		`UPDATE ` + pgx.Identifier{schema, "idempotency_keys"}.Sanitize() + ` SET expires_at = now() + interval '1 hour'`,
	} {
		_, err := pool.Exec(ctx, q)
		require.NoError(t, err)
	}
	_, err := pool.Exec(ctx, `SELECT setval(pg_get_serial_sequence($1, 'id'), (SELECT max(id) FROM `+pgx.Identifier{schema, "job_runs"}.Sanitize()+`))`,
		pgx.Identifier{schema, "job_runs"}.Sanitize())
	require.NoError(t, err)
}

// pgSet is the four Postgres stores in one schema, migrated.
type pgSet struct {
	leases *pglease.Backend
	ledger *pgledger.Ledger
	guard  *pgfence.Guard
	idem   *pgstore.Store
}

// pgStoresIn makes and migrates every store in schema; holder labels the
// leases.
func pgStoresIn(t *testing.T, pool *pgxpool.Pool, schema, holder string) pgSet {
	ctx := t.Context()
	leases, err := pglease.New(pool, pglease.Options{Schema: schema, Holder: holder})
	require.NoError(t, err)
	require.NoError(t, leases.Migrate(ctx))
	l, err := pgledger.New(pool, pgledger.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, l.Migrate(ctx))
	guard, err := pgfence.New(pgfence.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, guard.Migrate(ctx, pool))
	idem, err := pgstore.NewStore(pool, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, idem.Migrate(ctx))
	return pgSet{leases: leases, ledger: l, guard: guard, idem: idem}
}

// pgVolatile matches what differs between runs in a row: tokens and
// epoch times (see volatile), ISO timestamps, and random lock values.
var pgVolatile = regexp.MustCompile(`[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(Z|[+-][0-9:]+)?|[0-9]{10,}(\.[0-9]+)?|[A-Za-z0-9_-]{22,}`)

// pgShape is a dump's layout: the schema lines, and per table the column
// names of its rows with their values' JSON kinds and volatile parts out.
func pgShape(d pgDump) []string {
	out := append([]string(nil), d.Schema...)
	for table, rows := range d.Rows {
		for _, row := range rows {
			var cols []string
			for c, v := range row {
				b, _ := json.Marshal(v)
				cols = append(cols, c+"="+pgVolatile.ReplaceAllString(string(b), "<v>"))
			}
			sort.Strings(cols)
			out = append(out, table+" row "+strings.Join(cols, " "))
		}
	}
	sort.Strings(out)
	return out
}

// The Postgres state of format 1: the current code's layout is the
// fixture's, and it operates on the fixture's rows as on its own.
func TestGoldenPostgresFormat1(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := shared.Pool(t)

	schema := pgtest.Schema(t, pool, "compat_")
	pgWorkload(t, pool, schema)
	current := dumpPostgres(t, pool, schema)
	var fixture pgDump
	if *update {
		fixture = current
	}
	readFixture(t, "postgres_format1.json", &fixture)
	require.Equal(t, pgShape(fixture), pgShape(current),
		"the stored layout changed: a change old builds cannot read raises the format version (docs/compatibility.md); "+
			"one they can is written to the fixture with -update")

	schema = pgtest.Schema(t, pool, "compat_")
	restorePostgres(t, pool, schema, fixture)
	scope := ledger.UnitScope(goldenSlot.Job, goldenSlot.Partition)
	var old fence.Token
	for _, row := range fixture.Rows["leases"] {
		if row["name"] == scope {
			old = fence.Token(row["token"].(float64))
		}
	}
	require.NotZero(t, old, "the fixture holds the lease's token")
	stale := fence.Holder{Scope: scope, Token: old, Owner: goldenOwner}
	older := fence.Holder{Scope: scope, Token: old - 1, Owner: "owner-z"}

	leases, err := pglease.New(pool, pglease.Options{Schema: schema})
	require.NoError(t, err)
	g, err := leases.Acquire(ctx, scope, "owner-b", time.Minute)
	require.NoError(t, err)
	require.True(t, g.Acquired)
	require.Greater(t, g.Token, old)
	held, err := leases.Acquire(ctx, "held", "owner-b", time.Minute)
	require.NoError(t, err)
	require.False(t, held.Acquired, "the fixture's held lease is held")
	fresh := fence.Holder{Scope: scope, Token: g.Token, Owner: "owner-b"}

	l, err := pgledger.New(pool, pgledger.Options{Schema: schema})
	require.NoError(t, err)
	rec, ok, err := l.Get(ctx, goldenSlot)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, ledger.StatusSucceeded, rec.Status)
	require.Equal(t, 1, rec.Attempt)
	require.Len(t, rec.Attempts, 1)
	require.Equal(t, "replica-1", rec.Attempts[0].Holder)
	paused, err := l.Paused(ctx, "paused-job")
	require.NoError(t, err)
	require.True(t, paused)
	next := ledger.Slot{Job: goldenSlot.Job, At: goldenSlot.At.Add(time.Hour), Partition: goldenSlot.Partition}
	_, _, err = l.Begin(ctx, next, ledger.Fence{Scope: scope, Token: older.Token, Owner: older.Owner}, 3, next.At)
	require.ErrorIs(t, err, fence.ErrStaleToken, "a token below the fixture's ledger fence")
	_, _, err = l.Begin(ctx, next, ledger.Fence{Scope: scope, Token: g.Token, Owner: "owner-b"}, 3, next.At)
	require.NoError(t, err)

	guard, err := pgfence.New(pgfence.Options{Schema: schema})
	require.NoError(t, err)
	check := func(h fence.Holder) error {
		return pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
			return guard.Check(ctx, tx, "orders", h)
		})
	}
	require.ErrorIs(t, check(older), fence.ErrStaleToken)
	require.NoError(t, check(stale), "the same holder again is accepted")
	require.NoError(t, check(fresh))
	require.ErrorIs(t, check(stale), fence.ErrStaleToken)
	slotHolder := func(at int64, tok fence.Token, owner string) fence.Holder {
		return fence.Holder{Scope: fmt.Sprintf("%s@%d", goldenSlotUnit, at), Token: tok, Owner: owner}
	}
	require.ErrorIs(t, check(slotHolder(goldenSlotScopeAt, 8, "owner-b")), fence.ErrScopeClosed, "the fixture's pruned slot stays closed")
	require.ErrorIs(t, check(slotHolder(goldenSlotScopeAt+3600, 6, "owner-b")), fence.ErrStaleToken, "the kept slot's fence")
	require.NoError(t, check(slotHolder(goldenSlotScopeAt+3600, 7, goldenOwner)), "the kept slot's holder")
	n, err := guard.PruneSlotScopes(ctx, pool, "orders", goldenSlotUnit, time.Unix(goldenSlotScopeAt+3601, 0))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.ErrorIs(t, check(slotHolder(goldenSlotScopeAt+3600, 9, goldenOwner)), fence.ErrScopeClosed)

	s, err := pgstore.NewStore(pool, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	out, err := s.Begin(ctx, "key-1", "fingerprint-1", time.Minute)
	require.NoError(t, err)
	require.Equal(t, idemstore.StateCompleted, out.State)
	require.Equal(t, http.StatusCreated, out.Response.Status)
	require.Equal(t, `{"ok":true}`, string(out.Response.Body))
}
