package pglease_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver/leasedrivertest"
	"github.com/holdfast-go/holdfast/lease/pglease"
)

// TestConformance runs the lease contract (leasedrivertest.Exercise) on
// lease.NewWithBackend over the Postgres Backend, each check in a schema
// of its own, once per isolation level a database may default to
// (pgtest.Isolations, set as default_transaction_isolation on the
// backends' connections). Every Client gets a Backend of its own over one
// pool, as replicas would over their own pools. The backend is no
// leasedriver.Notifier: waiters poll (see the package documentation).
func TestConformance(t *testing.T) {
	t.Parallel()
	pgtest.EachIsolation(t, func(t *testing.T, iso string) {
		leasedrivertest.Exercise(t, func(t *testing.T) leasedrivertest.Store { return pgStore(t, iso) })
	})
}

// pgStore describes the Backend, its connections at isolation, to the
// suite: Inspect reads the row (owner and remaining TTL, free when
// expired), Expire sets its expiry to -infinity as the passing of its TTL
// would, and Commands counts the round trips the Clients' backends made
// (a batch is one).
func pgStore(t *testing.T, isolation string) leasedrivertest.Store {
	t.Helper()
	pool := shared.Pool(t) // the suite's own reads and writes
	schema := shared.Schema(t, "pglease_test_")
	db := &splitDB{Pool: shared.PoolAt(t, isolation)} // sends statements alone, as a pool does
	b, err := pglease.New(db, pglease.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, b.Migrate(t.Context()))
	table := pgx.Identifier{schema, "leases"}.Sanitize()
	sent := func() int64 { return db.alone.Load() + db.batches.Load() }
	before := sent() // Migrate is not the Clients'
	return leasedrivertest.Store{
		NewClient: func(t *testing.T, opts lease.Options) *lease.Client {
			t.Helper()
			b, err := pglease.New(db, pglease.Options{Schema: schema, Holder: opts.Holder})
			require.NoError(t, err)
			c, err := lease.NewWithBackend(b, opts)
			require.NoError(t, err)
			return c
		},
		Expire: func(ctx context.Context, name string) error {
			_, err := pool.Exec(ctx, `UPDATE `+table+` SET expires_at = '-infinity' WHERE name = $1`, name)
			return err
		},
		Inspect: func(ctx context.Context, name string) (string, time.Duration, error) {
			var owner string
			var ms int64
			err := pool.QueryRow(ctx, `SELECT owner, ceil(extract(epoch FROM expires_at - clock_timestamp()) * 1000)::bigint
				FROM `+table+` WHERE name = $1 AND expires_at > clock_timestamp()`, name).Scan(&owner, &ms)
			if errors.Is(err, pgx.ErrNoRows) {
				return "", 0, nil
			}
			return owner, time.Duration(ms) * time.Millisecond, err
		},
		HolderLabel: func(ctx context.Context, name string) (string, error) {
			var holder string
			err := pool.QueryRow(ctx, `SELECT holder FROM `+table+` WHERE name = $1 AND expires_at > clock_timestamp()`, name).Scan(&holder)
			if errors.Is(err, pgx.ErrNoRows) {
				return "", nil
			}
			return holder, err
		},
		Commands:              func() int64 { return sent() - before },
		NoReleaseNotification: true,
	}
}
