package pgfence_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// These tests run against a real PostgreSQL: DATABASE_URL, or
// defaultDatabaseURL when unset. An unreachable database fails every test
// that needs it unless HOLDFAST_SKIP_INTEGRATION=1. Each test works in a
// schema of its own and drops it afterwards.

// raceWriters is how many transactions the race tests run at once.
const raceWriters = 32

// shared is the package's one pool: the race tests need their writers in
// flight at once, not queued behind a small pool.
var shared = pgtest.Shared{MaxConns: raceWriters + 8}

func TestMain(m *testing.M) { pgtest.Main(m, &shared) }

func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return shared.Pool(t)
}

// bundle is one test's setup: a migrated guard in a fresh schema, with a
// business table and an append-only history table beside it.
type bundle struct {
	pool     *pgxpool.Pool
	guard    *pgfence.Guard
	schema   string
	business string // (id int primary key, value text): the fenced write
	history  string // (seq bigserial, token, owner): accepted writes in commit order
}

func setup(t *testing.T) *bundle {
	t.Helper()
	pool := testPool(t)
	schema := newSchema(t)
	guard, err := pgfence.New(pgfence.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, guard.Migrate(t.Context(), pool))

	b := &bundle{
		pool:     pool,
		guard:    guard,
		schema:   schema,
		business: pgx.Identifier{schema, "business"}.Sanitize(),
		history:  pgx.Identifier{schema, "history"}.Sanitize(),
	}
	_, err = pool.Exec(t.Context(), `CREATE TABLE `+b.business+` (id int PRIMARY KEY, value text NOT NULL)`)
	require.NoError(t, err)
	_, err = pool.Exec(t.Context(), `CREATE TABLE `+b.history+` (seq bigserial PRIMARY KEY, token bigint NOT NULL, owner text NOT NULL)`)
	require.NoError(t, err)
	return b
}

// newSchema returns a fresh schema name, dropped when the test ends.
func newSchema(t testing.TB) string {
	t.Helper()
	return shared.Schema(t, "pgfence_test_")
}

// fencedWrite is the way the package is meant to be used: Check, then the
// business write and a history row, in one transaction, rolled back on any
// error.
func (b *bundle) fencedWrite(ctx context.Context, resource string, token fence.Token, owner, value string) error {
	return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if err := b.guard.Check(ctx, tx, resource, fence.Holder{Token: token, Owner: owner}); err != nil {
			return err
		}
		return b.write(ctx, tx, token, owner, value)
	})
}

// unguardedWrite is the negative control: the same write without Check.
func (b *bundle) unguardedWrite(ctx context.Context, _ string, token fence.Token, owner, value string) error {
	return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		return b.write(ctx, tx, token, owner, value)
	})
}

// write upserts business row 1 and appends to the history. Under the guard
// the history's seq order is the commit order: the append happens while the
// guard row is locked, which orders the writers.
func (b *bundle) write(ctx context.Context, tx pgx.Tx, token fence.Token, owner, value string) error {
	if _, err := tx.Exec(ctx, `INSERT INTO `+b.business+` (id, value) VALUES (1, $1)
		ON CONFLICT (id) DO UPDATE SET value = EXCLUDED.value`, value); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO `+b.history+` (token, owner) VALUES ($1, $2)`, int64(token), owner)
	return err
}

func (b *bundle) businessValue(t *testing.T) string {
	t.Helper()
	var v string
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT value FROM `+b.business+` WHERE id = 1`).Scan(&v))
	return v
}

func (b *bundle) historyTokens(t *testing.T) []fence.Token {
	t.Helper()
	rows, err := b.pool.Query(t.Context(), `SELECT token FROM `+b.history+` ORDER BY seq`)
	require.NoError(t, err)
	tokens, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (fence.Token, error) {
		var v int64
		err := r.Scan(&v)
		return fence.Token(v), err
	})
	require.NoError(t, err)
	return tokens
}

// checkHistory is the checker: the tokens accepted for one resource, in
// commit order, must strictly increase (distinct owners, distinct tokens).
// It returns an error naming the first violation.
func checkHistory(history []fence.Token) error {
	for i := 1; i < len(history); i++ {
		if history[i] <= history[i-1] {
			return fmt.Errorf("history not strictly increasing at commit %d: token %d after %d", i, history[i], history[i-1])
		}
	}
	return nil
}

func TestCheckAcceptsFreshTokenAndCommitsWrite(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()

	require.NoError(t, b.fencedWrite(ctx, "res", 10, "owner-a", "from-10"))
	require.Equal(t, "from-10", b.businessValue(t))

	// A larger token from another owner (the next lease holder) is fresh too.
	require.NoError(t, b.fencedWrite(ctx, "res", 11, "owner-b", "from-11"))
	require.Equal(t, "from-11", b.businessValue(t))

	token, owner, err := b.guard.Current(ctx, b.pool, "res", "")
	require.NoError(t, err)
	require.Equal(t, fence.Token(11), token)
	require.Equal(t, "owner-b", owner)
	require.Equal(t, []fence.Token{10, 11}, b.historyTokens(t))
}

func TestCheckRejectsStaleTokenAndRollsBack(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()

	require.NoError(t, b.fencedWrite(ctx, "res", 20, "new-holder", "from-20"))

	// The paused holder writes first and checks afterwards: the refused
	// Check must take its write down with the transaction.
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if err := b.write(ctx, tx, 19, "old-holder", "from-19"); err != nil {
			return err
		}
		return b.guard.Check(ctx, tx, "res", fence.Holder{Token: 19, Owner: "old-holder"})
	})

	require.ErrorIs(t, err, fence.ErrStaleToken)
	var stale *fence.StaleTokenError
	require.ErrorAs(t, err, &stale)
	require.Equal(t, fence.StaleTokenError{Resource: "res", Presented: 19, Current: 20}, *stale)

	require.Equal(t, "from-20", b.businessValue(t))
	require.Equal(t, []fence.Token{20}, b.historyTokens(t))
	token, owner, err := b.guard.Current(ctx, b.pool, "res", "")
	require.NoError(t, err)
	require.Equal(t, fence.Token(20), token)
	require.Equal(t, "new-holder", owner)
}

func TestCheckEqualToken(t *testing.T) {
	t.Parallel()
	b := setup(t)

	t.Run("SameOwnerAccepted", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		require.NoError(t, b.guard.Check(ctx, b.pool, "same-owner", fence.Holder{Token: 30, Owner: "holder"}))
		// The same holder writing again under the same lease.
		require.NoError(t, b.guard.Check(ctx, b.pool, "same-owner", fence.Holder{Token: 30, Owner: "holder"}))
	})

	t.Run("OtherOwnerRejected", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		require.NoError(t, b.guard.Check(ctx, b.pool, "other-owner", fence.Holder{Token: 30, Owner: "holder"}))
		err := b.guard.Check(ctx, b.pool, "other-owner", fence.Holder{Token: 30, Owner: "impostor"})
		var stale *fence.StaleTokenError
		require.ErrorAs(t, err, &stale)
		require.Equal(t, fence.StaleTokenError{Resource: "other-owner", Presented: 30, Current: 30}, *stale)

		token, owner, err := b.guard.Current(ctx, b.pool, "other-owner", "")
		require.NoError(t, err)
		require.Equal(t, fence.Token(30), token)
		require.Equal(t, "holder", owner)
	})
}

func TestCheckRejectsTokenZero(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()

	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(context.Background()) //nolint:errcheck // test cleanup

	err = b.guard.Check(ctx, tx, "res", fence.Holder{Token: fence.None, Owner: "holder"})
	require.ErrorIs(t, err, fence.ErrNoToken)
	require.NotErrorIs(t, err, fence.ErrStaleToken)

	// Nothing was sent: the transaction is not aborted and no row exists.
	token, owner, err := b.guard.Current(ctx, tx, "res", "")
	require.NoError(t, err)
	require.Equal(t, fence.None, token)
	require.Empty(t, owner)
	require.NoError(t, b.guard.Check(ctx, tx, "res", fence.Holder{Token: 1, Owner: "holder"}))
	require.NoError(t, tx.Commit(ctx))
}

func TestCheckAcceptsBoundaryValues(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	longest := strings.Repeat("r", pgfence.MaxResourceLen)

	require.NoError(t, b.guard.Check(ctx, b.pool, longest, fence.Holder{Token: math.MaxInt64, Owner: "holder"}))
	token, _, err := b.guard.Current(ctx, b.pool, longest, "")
	require.NoError(t, err)
	require.Equal(t, fence.Token(math.MaxInt64), token)
}

func TestCurrentOfUnknownResourceIsNone(t *testing.T) {
	t.Parallel()
	b := setup(t)

	token, owner, err := b.guard.Current(t.Context(), b.pool, "never-written", "")
	require.NoError(t, err)
	require.Equal(t, fence.None, token)
	require.Empty(t, owner)
}

// untouchable is a DBTX that records any use: bad input must be refused
// before the database is reached.
type untouchable struct{ calls int }

func (u *untouchable) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	u.calls++
	return pgconn.CommandTag{}, errors.New("untouchable: Exec called")
}

func (u *untouchable) QueryRow(context.Context, string, ...any) pgx.Row {
	u.calls++
	return errRow{}
}

type errRow struct{}

func (errRow) Scan(...any) error { return errors.New("untouchable: QueryRow called") }

func TestCheckBadInput(t *testing.T) {
	t.Parallel()
	guard, err := pgfence.New(pgfence.Options{})
	require.NoError(t, err)

	tests := []struct {
		name     string
		resource string
		token    fence.Token
		owner    string
		want     error
	}{
		{"EmptyResource", "", 1, "holder", pgfence.ErrInvalidResource},
		{"ResourceTooLong", strings.Repeat("r", pgfence.MaxResourceLen+1), 1, "holder", pgfence.ErrInvalidResource},
		{"ResourceWithNUL", "a\x00b", 1, "holder", pgfence.ErrInvalidResource},
		{"ResourceNotUTF8", "a\xffb", 1, "holder", pgfence.ErrInvalidResource},
		{"EmptyOwner", "res", 1, "", pgfence.ErrInvalidOwner},
		{"OwnerWithNUL", "res", 1, "a\x00b", pgfence.ErrInvalidOwner},
		{"OwnerNotUTF8", "res", 1, "\xc3", pgfence.ErrInvalidOwner},
		{"TokenZero", "res", fence.None, "holder", fence.ErrNoToken},
		{"TokenAboveMaxInt64", "res", math.MaxInt64 + 1, "holder", pgfence.ErrTokenOutOfRange},
		{"TokenMaxUint64", "res", math.MaxUint64, "holder", pgfence.ErrTokenOutOfRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			db := &untouchable{}
			err := guard.Check(t.Context(), db, tt.resource, fence.Holder{Token: tt.token, Owner: tt.owner})
			require.ErrorIs(t, err, tt.want)
			require.NotErrorIs(t, err, fence.ErrStaleToken)
			require.Zero(t, db.calls, "the database was touched")
		})
	}

	t.Run("CurrentRefusesBadResource", func(t *testing.T) {
		t.Parallel()
		db := &untouchable{}
		_, _, err := guard.Current(t.Context(), db, "", "")
		require.ErrorIs(t, err, pgfence.ErrInvalidResource)
		require.Zero(t, db.calls)
	})

	t.Run("NilGuard", func(t *testing.T) {
		t.Parallel()
		var g *pgfence.Guard
		db := &untouchable{}
		require.ErrorIs(t, g.Check(t.Context(), db, "res", fence.Holder{Token: 1, Owner: "holder"}), pgfence.ErrNotCreated)
		require.ErrorIs(t, g.Migrate(t.Context(), db), pgfence.ErrNotCreated)
		require.Zero(t, db.calls)
	})
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  pgfence.Options
		ok   bool
	}{
		{"Defaults", pgfence.Options{}, true},
		{"CustomNames", pgfence.Options{Schema: "billing", Table: "guard_2"}, true},
		{"LongestSchema", pgfence.Options{Schema: strings.Repeat("s", 63)}, true},
		// The table of closed slot scopes, "<table>_closed", must fit in 63 bytes.
		{"LongestTable", pgfence.Options{Table: strings.Repeat("t", 63-len(pgfence.ClosedTableSuffix))}, true},
		{"TableTooLongForItsClosedTable", pgfence.Options{Table: strings.Repeat("t", 64-len(pgfence.ClosedTableSuffix))}, false},
		{"NameTooLong", pgfence.Options{Table: strings.Repeat("t", 64)}, false},
		{"UpperCase", pgfence.Options{Schema: "Billing"}, false},
		{"LeadingDigit", pgfence.Options{Table: "1guard"}, false},
		{"Dash", pgfence.Options{Table: "fence-guard"}, false},
		{"Quote", pgfence.Options{Schema: `x"y`}, false},
		{"Dot", pgfence.Options{Schema: "a.b"}, false},
		{"Injection", pgfence.Options{Table: "t; DROP TABLE users"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g, err := pgfence.New(tt.cfg)
			if tt.ok {
				require.NoError(t, err)
				require.NotNil(t, g)
				return
			}
			require.ErrorIs(t, err, pgfence.ErrInvalidOptions)
			require.Nil(t, g)
		})
	}
}

// Migrate runs concurrently into a schema that does not exist yet, at
// every isolation level a database may default to: the script sets its
// own transaction to READ COMMITTED, so a run that waited for another's
// lock sees what that one created. Under REPEATABLE READ its snapshot
// predated the other run's commit, and 002 tried to add the scope column
// again ("column already exists").
func TestMigrateConcurrentlyIsIdempotent(t *testing.T) {
	t.Parallel()
	pgtest.EachIsolation(t, func(t *testing.T, iso string) {
		testMigrateConcurrently(t, shared.PoolAt(t, iso))
	})
}

func testMigrateConcurrently(t *testing.T, pool *pgxpool.Pool) {
	ctx := t.Context()
	schema := newSchema(t)

	// Two guard tables in one schema: the lock must cover CREATE SCHEMA too.
	var guards []*pgfence.Guard
	for _, table := range []string{"guard_a", "guard_b"} {
		g, err := pgfence.New(pgfence.Options{Schema: schema, Table: table})
		require.NoError(t, err)
		guards = append(guards, g)
	}

	const runs = 8
	start := make(chan struct{})
	errs := make([]error, runs)
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			<-start
			errs[i] = guards[i%len(guards)].Migrate(ctx, pool)
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "Migrate run %d", i)
	}

	// Again, now that everything exists, and once inside a transaction.
	for _, g := range guards {
		require.NoError(t, g.Migrate(ctx, pool))
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return g.Migrate(ctx, tx) }))
		require.NoError(t, g.Check(ctx, pool, "res", fence.Holder{Token: 1, Owner: "holder"}))
	}
	var tables int
	require.NoError(t, pool.QueryRow(ctx,
		`SELECT count(*) FROM information_schema.tables WHERE table_schema = $1`, schema).Scan(&tables))
	require.Equal(t, 4, tables, "two guard tables and their tables of closed slot scopes")
}

// writeFunc is one writer's transaction in a race: fencedWrite or the
// unguarded negative control.
type writeFunc func(ctx context.Context, resource string, token fence.Token, owner, value string) error

// race runs raceWriters transactions at once on one resource, each with a
// distinct random token, and returns the tokens and each writer's error.
func race(t *testing.T, write writeFunc) (tokens []fence.Token, errs []error) {
	t.Helper()
	seen := map[fence.Token]bool{}
	for len(tokens) < raceWriters {
		tok := fence.Token(rand.Uint64N(1<<40) + 1)
		if !seen[tok] {
			seen[tok] = true
			tokens = append(tokens, tok)
		}
	}
	t.Logf("tokens in writer order: %v", tokens)

	ctx := t.Context()
	start := make(chan struct{})
	errs = make([]error, raceWriters)
	var wg sync.WaitGroup
	for i, tok := range tokens {
		wg.Go(func() {
			<-start
			errs[i] = write(ctx, "contended", tok, fmt.Sprintf("owner-%02d", i), tok.String())
		})
	}
	close(start)
	wg.Wait()
	return tokens, errs
}

func TestCheckRaceAcceptedTokensStrictlyIncrease(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tokens, errs := race(t, b.fencedWrite)

	accepted := 0
	for i, err := range errs {
		if err == nil {
			accepted++
			continue
		}
		// Tokens are distinct, so a refusal always names a larger current one.
		var stale *fence.StaleTokenError
		require.ErrorAs(t, err, &stale, "writer %d: only stale-token refusals are expected", i)
		require.Equal(t, tokens[i], stale.Presented)
		require.Greater(t, stale.Current, stale.Presented)
	}

	history := b.historyTokens(t)
	t.Logf("accepted %d of %d, history in commit order: %v", accepted, len(tokens), history)
	require.Len(t, history, accepted)
	require.NotEmpty(t, history)
	require.NoError(t, checkHistory(history))

	highest := slices.Max(tokens)
	require.Equal(t, highest, history[len(history)-1], "the largest token is always accepted, and last")
	current, _, err := b.guard.Current(t.Context(), b.pool, "contended", "")
	require.NoError(t, err)
	require.Equal(t, slices.Max(history), current)
	require.Equal(t, highest.String(), b.businessValue(t))
}

// TestUnguardedRaceIsCaughtByChecker is the negative control: the same race
// with Check removed commits tokens in arbitrary order, and the checker used
// above must say so. Its history is strictly increasing with probability
// 1/32! only.
func TestUnguardedRaceIsCaughtByChecker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	_, errs := race(t, b.unguardedWrite)
	for i, err := range errs {
		require.NoError(t, err, "writer %d", i)
	}

	history := b.historyTokens(t)
	require.Len(t, history, raceWriters)
	violation := checkHistory(history)
	require.Error(t, violation, "the checker accepted an unguarded history: %v", history)
	t.Logf("checker, as expected: %v", violation)
}

// writeBehindNewer races an older holder's write against a newer one's
// open transaction: newer runs in one transaction, then older in another,
// which must wait on the newer one's lock (what: the failure message when
// it never does); the newer transaction then commits (commitNewer) or
// rolls back, and older's error is returned, its transaction committed
// when it succeeded.
func writeBehindNewer(t *testing.T, pool *pgxpool.Pool, what string, commitNewer bool, newer, older func(context.Context, pgx.Tx) error) error {
	t.Helper()
	ctx := t.Context()
	newerTx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer newerTx.Rollback(context.Background()) //nolint:errcheck // no-op after Commit
	require.NoError(t, newer(ctx, newerTx))

	olderTx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer olderTx.Rollback(context.Background()) //nolint:errcheck // test cleanup
	pid := olderTx.Conn().PgConn().PID()

	var olderErr error
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		olderErr = older(ctx, olderTx)
	}()
	defer func() { // on failure too: end newer, which unblocks older
		newerTx.Rollback(context.Background()) //nolint:errcheck // no-op after Commit
		<-finished
	}()
	pgtest.WaitForLock(t, pool, pid, what)

	if commitNewer {
		require.NoError(t, newerTx.Commit(ctx))
	} else {
		require.NoError(t, newerTx.Rollback(ctx))
	}
	<-finished
	if olderErr == nil {
		require.NoError(t, olderTx.Commit(ctx))
	}
	return olderErr
}

func TestCheckWaitsForConcurrentWriter(t *testing.T) {
	t.Parallel()
	b := setup(t)

	// The newer holder has checked (and holds the guard row) while the old
	// holder, resumed from a pause, checks with a smaller token. The old one
	// must wait, then get the answer the newer one's outcome dictates.
	run := func(t *testing.T, resource string, commitNewer bool) error {
		return writeBehindNewer(t, b.pool, "the older writer never waited on the guard row", commitNewer,
			func(ctx context.Context, tx pgx.Tx) error {
				return b.guard.Check(ctx, tx, resource, fence.Holder{Token: 50, Owner: "newer"})
			},
			func(ctx context.Context, tx pgx.Tx) error {
				return b.guard.Check(ctx, tx, resource, fence.Holder{Token: 40, Owner: "older"})
			})
	}

	t.Run("NewerCommitsOlderRefused", func(t *testing.T) {
		t.Parallel()
		err := run(t, "commit", true)
		var stale *fence.StaleTokenError
		require.ErrorAs(t, err, &stale)
		require.Equal(t, fence.Token(50), stale.Current)
	})

	t.Run("NewerRollsBackOlderAccepted", func(t *testing.T) {
		t.Parallel()
		// Token 50 never committed, so 40 is the freshest the guard has seen.
		require.NoError(t, run(t, "rollback", false))
	})
}

func TestCheckSerializationFailureIsRetryable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()
	require.NoError(t, b.guard.Check(ctx, b.pool, "res", fence.Holder{Token: 1, Owner: "first"}))

	tx, err := b.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.Serializable})
	require.NoError(t, err)
	defer tx.Rollback(context.Background()) //nolint:errcheck // test cleanup
	// The first read takes the transaction's snapshot.
	_, _, err = b.guard.Current(ctx, tx, "res", "")
	require.NoError(t, err)

	require.NoError(t, b.guard.Check(ctx, b.pool, "res", fence.Holder{Token: 2, Owner: "second"})) // commits after it

	err = b.guard.Check(ctx, tx, "res", fence.Holder{Token: 3, Owner: "third"})
	require.ErrorIs(t, err, pgfence.ErrRetryable)
	require.NotErrorIs(t, err, fence.ErrStaleToken)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "40001", pgErr.Code)

	// Running the transaction again succeeds.
	require.NoError(t, tx.Rollback(ctx))
	require.NoError(t, pgx.BeginTxFunc(ctx, b.pool, pgx.TxOptions{IsoLevel: pgx.Serializable}, func(tx pgx.Tx) error {
		return b.guard.Check(ctx, tx, "res", fence.Holder{Token: 3, Owner: "third"})
	}))
}

func TestCheckDeadlockIsRetryable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := t.Context()

	// Two transactions lock "a" and "b", then each checks the other's
	// resource: Postgres kills one of them after deadlock_timeout.
	begin := func(resource string, token fence.Token) pgx.Tx {
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { tx.Rollback(context.Background()) }) //nolint:errcheck // test cleanup
		require.NoError(t, b.guard.Check(ctx, tx, resource, fence.Holder{Token: token, Owner: fmt.Sprint("owner-", token)}))
		return tx
	}
	txs := []pgx.Tx{begin("a", 10), begin("b", 20)}
	other := []string{"b", "a"}
	tokens := []fence.Token{10, 20}

	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, tx := range txs {
		wg.Go(func() {
			errs[i] = b.guard.Check(ctx, tx, other[i], fence.Holder{Token: tokens[i], Owner: fmt.Sprint("owner-", tokens[i])})
			if errs[i] != nil {
				tx.Rollback(ctx) //nolint:errcheck // releases the survivor's wait
			}
		})
	}
	wg.Wait()

	var failed []error
	for _, err := range errs {
		if err != nil {
			failed = append(failed, err)
		}
	}
	require.Len(t, failed, 1, "exactly one transaction is the deadlock victim: %v", errs)
	require.ErrorIs(t, failed[0], pgfence.ErrRetryable)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, failed[0], &pgErr)
	require.Equal(t, "40P01", pgErr.Code)
}

func TestCheckWithoutMigrateReturnsPgError(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	guard, err := pgfence.New(pgfence.Options{Schema: fmt.Sprintf("pgfence_absent_%016x", rand.Uint64())})
	require.NoError(t, err)

	err = guard.Check(t.Context(), pool, "res", fence.Holder{Token: 1, Owner: "holder"})
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr)
	require.Equal(t, "42P01", pgErr.Code) // undefined_table
	require.NotErrorIs(t, err, pgfence.ErrRetryable)
	require.NotErrorIs(t, err, fence.ErrStaleToken)

	_, _, err = guard.Current(t.Context(), pool, "res", "")
	require.ErrorAs(t, err, &pgErr)
}

// TestQueryLogsNeverShowTheOwner: what pgx's tracelog logs of every
// statement (the arguments included) never holds a holder's owner (a
// write capability): Check in the caller's transaction (a plain and a
// slot scope, and a stale token refused), CheckOwnTx (both scopes), FencedUpsert and
// FencedUpdate. The owners still reach the fences and the row.
func TestQueryLogsNeverShowTheOwner(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var logged *pgtest.Args
	pool := pgtest.OwnPool(t, func(cfg *pgxpool.Config) { logged = pgtest.RecordArgs(cfg) })
	b, tb := setup(t), newTable(t)
	h := fence.Holder{Token: 10, Owner: "c4cf6eb9f6f86911b62410cefdeb973e", Scope: "settle"}
	slot := fence.Holder{Token: 7, Owner: "0f2b2d0e4c3a40c1a5e8f1d2c3b4a596", Scope: "settle|eu@1772928000"}
	stale := fence.Holder{Token: 9, Owner: "9d8c7b6a5f4e3d2c1b0a998877665544", Scope: "settle"}
	check := func(h fence.Holder) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return b.guard.Check(ctx, tx, "/pay", h) })
	}
	require.NoError(t, check(h))
	require.NoError(t, check(slot))
	require.ErrorIs(t, check(stale), fence.ErrStaleToken)
	require.NoError(t, b.guard.CheckOwnTx(ctx, pool, "/ledger", h))
	require.NoError(t, b.guard.CheckOwnTx(ctx, pool, "/ledger", slot))
	require.NoError(t, pgfence.FencedUpsert(ctx, pool, tb.row("a"), map[string]any{"value": "paid"}, h))
	require.NoError(t, pgfence.FencedUpdate(ctx, pool, tb.row("a"), map[string]any{"value": "paid twice"}, h))
	_, owner, err := b.guard.Current(ctx, pool, "/pay", h.Scope)
	require.NoError(t, err)
	require.Equal(t, h.Owner, owner, "the owner reached the fence")
	var rowOwner string
	require.NoError(t, pool.QueryRow(ctx, `SELECT fence_owner FROM `+tb.ident.Sanitize()+` WHERE id = 'a'`).Scan(&rowOwner))
	require.Equal(t, h.Owner, rowOwner, "the owner reached the row")

	require.Empty(t, logged.Showing(h.Owner, slot.Owner, stale.Owner), "a query log shows an owner")
	require.Greater(t, logged.Count(), 5)
	require.Contains(t, logged.String(), "[owner]")
}
