package pglease_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/leasedriver/leasedrivertest"
	"github.com/holdfast-go/holdfast/lease/pglease"
)

func newBackend(t *testing.T) (*pglease.Backend, string) {
	t.Helper()
	schema := shared.Schema(t, "pglease_test_")
	b, err := pglease.New(shared.Pool(t), pglease.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, b.Migrate(t.Context()))
	require.NoError(t, b.Migrate(t.Context()), "Migrate is idempotent")
	return b, pgx.Identifier{schema, "leases"}.Sanitize()
}

func TestNewRefusesBadConfig(t *testing.T) {
	t.Parallel()
	_, err := pglease.New(nil, pglease.Options{})
	require.ErrorIs(t, err, pglease.ErrInvalidOptions)
	_, err = pglease.New(shared.Pool(t), pglease.Options{Schema: "Bad-Schema"})
	require.ErrorIs(t, err, pglease.ErrInvalidOptions)
}

// An expired lease is not brought back by its holder's renewal, even when
// nobody took it since, and its release reports ErrNotHeld; the next
// acquisition's token is the next one.
func TestRenewNeverRecreatesAnExpiredLease(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b, table := newBackend(t)
	g, err := b.Acquire(ctx, "job", "a", time.Minute)
	require.NoError(t, err)
	require.True(t, g.Acquired)
	first := g.Token
	held := leasedriver.Held{Name: "job", Owner: "a", TTL: time.Minute}
	require.Equal(t, []error{nil}, b.Renew(ctx, []leasedriver.Held{held}))

	_, err = shared.Pool(t).Exec(ctx, `UPDATE `+table+` SET expires_at = clock_timestamp() - interval '1 millisecond' WHERE name = 'job'`)
	require.NoError(t, err)
	require.Equal(t, []error{lease.ErrNotHeld}, b.Renew(ctx, []leasedriver.Held{held}))
	require.ErrorIs(t, b.Release(ctx, held), lease.ErrNotHeld)

	g, err = b.Acquire(ctx, "job", "b", time.Minute)
	require.NoError(t, err)
	require.True(t, g.Acquired)
	require.Greater(t, g.Token, first)
}

// Tokens are max(last + 1, the database clock in µs): a deleted row (a
// retention job, a restore) does not bring them back below those issued
// before, and a row whose token ran ahead of the clock still counts up.
func TestTokensDoNotRegressWhenTheRowIsLost(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b, table := newBackend(t)
	g, err := b.Acquire(ctx, "job", "a", time.Minute)
	require.NoError(t, err)
	require.True(t, g.Acquired)
	before := g.Token
	_, err = shared.Pool(t).Exec(ctx, `DELETE FROM `+table+` WHERE name = 'job'`)
	require.NoError(t, err)
	g, err = b.Acquire(ctx, "job", "b", time.Minute)
	require.NoError(t, err)
	require.True(t, g.Acquired)
	require.Greater(t, g.Token, before, "a lost row does not restart tokens")
	t.Logf("token before the row was deleted %d, after %d", before, g.Token)

	ahead := fence.Token(math.MaxInt64 - 10)
	_, err = shared.Pool(t).Exec(ctx, `UPDATE `+table+` SET token = $1, owner = '', expires_at = '-infinity' WHERE name = 'job'`, int64(ahead))
	require.NoError(t, err)
	g, err = b.Acquire(ctx, "job", "c", time.Minute)
	require.NoError(t, err)
	require.Equal(t, ahead+1, g.Token)
}

// One statement renews a batch: each lease gets its own answer, by
// (name, owner).
func TestRenewAnswersEachLeaseOfABatch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	b, _ := newBackend(t)
	for _, name := range []string{"x", "y"} {
		g, err := b.Acquire(ctx, name, "a", time.Minute)
		require.NoError(t, err)
		require.True(t, g.Acquired)
	}
	g, err := b.Acquire(ctx, "x", "b", time.Minute)
	require.NoError(t, err)
	require.False(t, g.Acquired)
	require.Greater(t, g.Remaining, 59*time.Second)
	require.LessOrEqual(t, g.Remaining, time.Minute)

	errs := b.Renew(ctx, []leasedriver.Held{
		{Name: "x", Owner: "a", TTL: time.Minute},
		{Name: "y", Owner: "b", TTL: time.Minute}, // not b's
		{Name: "z", Owner: "a", TTL: time.Minute}, // never taken
		{Name: "y", Owner: "a", TTL: 2 * time.Minute},
	})
	require.Equal(t, []error{nil, lease.ErrNotHeld, lease.ErrNotHeld, nil}, errs)
	g, err = b.Acquire(ctx, "y", "b", time.Minute)
	require.NoError(t, err)
	require.Greater(t, g.Remaining, time.Minute, "y was renewed for its own TTL")
}

// TestQueryLogsNeverShowTheOwner: what pgx's tracelog logs of every
// statement (the arguments included) never holds an owner: acquire,
// renew (one and a batch), release, and the READ COMMITTED statements
// that tell why a lease was not renewed or released. The owners still
// reach the table:
// another owner cannot take the leases, and renew and release succeed.
func TestQueryLogsNeverShowTheOwner(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	var logged *pgtest.Args
	pool := pgtest.OwnPool(t, func(cfg *pgxpool.Config) { logged = pgtest.RecordArgs(cfg) })
	b, err := pglease.New(pool, pglease.Options{Schema: shared.Schema(t, "pglease_test_")})
	require.NoError(t, err)
	require.NoError(t, b.Migrate(ctx))
	c, err := lease.NewWithBackend(b, lease.Options{})
	require.NoError(t, err)

	one, err := c.TryAcquire(ctx, "one", time.Minute)
	require.NoError(t, err)
	two, err := c.TryAcquire(ctx, "two", time.Minute)
	require.NoError(t, err)
	require.NoError(t, one.Renew(ctx))
	held := []leasedriver.Held{
		{Name: "one", Owner: one.Holder().Owner, TTL: time.Minute},
		{Name: "two", Owner: two.Holder().Owner, TTL: time.Minute},
	}
	require.Equal(t, []error{nil, nil}, b.Renew(ctx, held), "a batch")
	g, err := b.Acquire(ctx, "one", "someone-else", time.Minute)
	require.NoError(t, err)
	require.False(t, g.Acquired, "the owner reached the table")
	require.NoError(t, one.Release(ctx))
	require.NoError(t, two.Release(ctx))
	// Not held any more: the direct statements change nothing, and the
	// statements in a READ COMMITTED transaction tell why.
	require.Equal(t, []error{lease.ErrNotHeld, lease.ErrNotHeld}, b.Renew(ctx, held))
	require.ErrorIs(t, b.Release(ctx, held[0]), lease.ErrNotHeld)

	owners := []string{one.Holder().Owner, two.Holder().Owner}
	require.NotContains(t, owners, "")
	require.Empty(t, logged.Showing(owners...), "a query log shows an owner")
	require.Greater(t, logged.Count(), 5)
	require.Contains(t, logged.String(), "[owner]")
}

// Every method that takes a context refuses a nil one with
// lease.ErrNilContext, before any I/O (they dereferenced it: a panic, a
// fresh user's trial), Migrate and PruneIdle too. The lease row is
// untouched.
func TestMethodsRefuseANilContext(t *testing.T) {
	t.Parallel()
	b, _ := newBackend(t)
	leasedrivertest.RequireNilContextRefused(t, b, "nilctx")
	var nilCtx context.Context
	require.ErrorIs(t, b.Migrate(nilCtx), lease.ErrNilContext)
	_, err := b.PruneIdle(nilCtx, pglease.MinIdle)
	require.ErrorIs(t, err, lease.ErrNilContext)
}

// A backend on a connection inside a transaction begun by hand refuses
// every call with ErrInvalidOptions before any I/O: its own COMMIT would
// commit the caller's transaction.
func TestBackendRefusesAConnectionInsideATransaction(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := shared.Schema(t, "pglease_intx_")
	b, err := pglease.New(shared.Pool(t), pglease.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, b.Migrate(ctx))
	conn, err := shared.Pool(t).Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	onConn, err := pglease.New(conn, pglease.Options{Schema: schema})
	require.NoError(t, err)
	_, err = onConn.Acquire(ctx, "intx", "owner-a", time.Minute)
	require.NoError(t, err, "outside a transaction")
	_, err = conn.Exec(ctx, `BEGIN`)
	require.NoError(t, err)
	_, err = onConn.Acquire(ctx, "intx2", "owner-a", time.Minute)
	require.ErrorIs(t, err, pglease.ErrInvalidOptions)
	_, err = onConn.Inspect(ctx, "intx")
	require.ErrorIs(t, err, pglease.ErrInvalidOptions)
	require.Equal(t, byte('T'), conn.Conn().PgConn().TxStatus(), "the caller's transaction is still open")
	_, err = conn.Exec(ctx, `ROLLBACK`)
	require.NoError(t, err)
	info, err := b.Inspect(ctx, "intx2")
	require.NoError(t, err)
	require.False(t, info.Held)
}
