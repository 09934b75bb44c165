package pglease_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/pglease"
)

// backendAt returns a migrated Backend in a fresh schema on a pool whose
// connections default to isolation (default_transaction_isolation).
func backendAt(t *testing.T, isolation string) *pglease.Backend {
	t.Helper()
	b, err := pglease.New(shared.PoolAt(t, isolation), pglease.Options{Schema: shared.Schema(t, "pglease_test_")})
	require.NoError(t, err)
	require.NoError(t, b.Migrate(t.Context()))
	return b
}

// clientOn returns a lease.Client of its own (its own owner) over b.
func clientOn(t *testing.T, b *pglease.Backend) *lease.Client {
	t.Helper()
	c, err := lease.NewWithBackend(b, lease.Options{})
	require.NoError(t, err)
	return c
}

// Racing tries on one lease answer a grant or ErrNotAcquired at every
// isolation level a database may default to, never a raw serialization
// failure (SQLSTATE 40001), and the lease has one holder at a time. Under
// REPEATABLE READ or SERIALIZABLE most tries failed with 40001 when the
// statements ran at the server's default level.
func TestRacingTryAcquireAtEveryIsolation(t *testing.T) {
	t.Parallel()
	const goroutines, tries = 8, 25
	for _, iso := range pgtest.Isolations {
		t.Run(iso, func(t *testing.T) {
			t.Parallel()
			b := backendAt(t, iso)
			var holders, granted, refused atomic.Int64
			var wg sync.WaitGroup
			errs := make(chan error, goroutines*tries)
			for range goroutines {
				c := clientOn(t, b)
				wg.Go(func() {
					for range tries {
						l, err := c.TryAcquire(t.Context(), "race", time.Minute)
						switch {
						case errors.Is(err, lease.ErrNotAcquired):
							refused.Add(1)
						case err != nil:
							errs <- err
						default:
							if n := holders.Add(1); n != 1 {
								errs <- errors.New("two holders at once")
							}
							granted.Add(1)
							holders.Add(-1)
							if err := l.Release(t.Context()); err != nil {
								errs <- err
							}
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			var got []error
			for err := range errs {
				got = append(got, err)
			}
			t.Logf("%s: %d granted, %d not acquired, %d errors", iso, granted.Load(), refused.Load(), len(got))
			require.Zero(t, len(got), "every try answers a grant or ErrNotAcquired; first error: %v", first(got))
			require.Equal(t, int64(goroutines*tries), granted.Load()+refused.Load())
			require.Positive(t, granted.Load())
		})
	}
}

// A live holder keeps its lease (TTL 1 s) through many renew intervals
// while competitors keep trying it, at every isolation level: their
// failed tries must not make its renewals fail. Under REPEATABLE READ or
// SERIALIZABLE the holder lost the lease within about 2-3 s, its renewals
// failing with 40001 on the rows the tries had touched.
func TestLiveHolderKeepsItsLeaseAgainstCompetitorsAtEveryIsolation(t *testing.T) {
	t.Parallel()
	const (
		ttl         = time.Second
		competitors = 4
		span        = 4 * ttl // 12 renew intervals
	)
	for _, iso := range pgtest.Isolations {
		t.Run(iso, func(t *testing.T) {
			t.Parallel()
			b := backendAt(t, iso)
			holder, err := clientOn(t, b).TryAcquire(t.Context(), "kept", ttl)
			require.NoError(t, err)
			t.Cleanup(func() { _ = holder.Release(t.Context()) })
			token := holder.Token()

			var wg sync.WaitGroup
			var tries, taken atomic.Int64
			var mu sync.Mutex
			var other []error
			end := time.Now().Add(span)
			for range competitors {
				c := clientOn(t, b)
				wg.Go(func() {
					for time.Now().Before(end) && holder.Err() == nil {
						tries.Add(1)
						l, err := c.TryAcquire(t.Context(), "kept", ttl)
						switch {
						case err == nil:
							taken.Add(1)
							_ = l.Release(t.Context())
						case !errors.Is(err, lease.ErrNotAcquired):
							mu.Lock()
							other = append(other, err)
							mu.Unlock()
						}
					}
				})
			}
			wg.Wait()
			t.Logf("%s: %d competing tries over %v, %d took the lease, %d other errors", iso, tries.Load(), span, taken.Load(), len(other))
			require.NoError(t, holder.Err(), "the holder kept its lease")
			require.Equal(t, token, holder.Token())
			require.Zero(t, taken.Load(), "no competitor took the held lease")
			require.Zero(t, len(other), "every competing try answers ErrNotAcquired; first error: %v", first(other))
			require.Greater(t, tries.Load(), int64(competitors))
		})
	}
}

// first returns errs[0], or nil.
func first(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}

// splitDB counts what a Backend sends: statements alone (Exec, Query,
// QueryRow) and batches (each a READ COMMITTED transaction, pgtx.Batch).
type splitDB struct {
	*pgxpool.Pool
	alone, batches atomic.Int64
}

func (d *splitDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	d.alone.Add(1)
	return d.Pool.Exec(ctx, sql, args...)
}

func (d *splitDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	d.alone.Add(1)
	return d.Pool.Query(ctx, sql, args...)
}

func (d *splitDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	d.alone.Add(1)
	return d.Pool.QueryRow(ctx, sql, args...)
}

func (d *splitDB) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	d.batches.Add(1)
	return d.Pool.SendBatch(ctx, b)
}

// Where the default level is READ COMMITTED, acquire, renew and release
// are each one statement sent alone, without BEGIN and COMMIT. At another
// default, the first statement sent alone writes nothing (its writes are
// gated on pgtx.AtReadCommitted) and goes again in a READ COMMITTED
// transaction, as every statement after it does; the lease works alike.
func TestStatementsGoAloneAtReadCommitted(t *testing.T) {
	t.Parallel()
	pgtest.EachIsolation(t, func(t *testing.T, iso string) {
		ctx := t.Context()
		db := &splitDB{Pool: shared.PoolAt(t, iso)}
		b, err := pglease.New(db, pglease.Options{Schema: shared.Schema(t, "pglease_test_")})
		require.NoError(t, err)
		require.NoError(t, b.Migrate(ctx))
		c := clientOn(t, b)
		l, err := c.TryAcquire(ctx, "alone", time.Minute) // checks the stored format first: one batch
		require.NoError(t, err)
		rc := iso == "read committed"
		require.EqualValues(t, map[bool]int{true: 1, false: 2}[rc], db.batches.Load(), "batches of the first acquire")
		alone, batches := db.alone.Load(), db.batches.Load()
		require.NoError(t, l.Renew(ctx))
		require.NoError(t, l.Release(ctx))
		l, err = c.TryAcquire(ctx, "alone", time.Minute)
		require.NoError(t, err)
		require.NoError(t, l.Release(ctx))
		if rc {
			require.EqualValues(t, 4, db.alone.Load()-alone, "renew, release, acquire, release: alone")
			require.EqualValues(t, 0, db.batches.Load()-batches)
		} else {
			require.EqualValues(t, 0, db.alone.Load()-alone)
			require.EqualValues(t, 4, db.batches.Load()-batches, "renew, release, acquire, release: in batches")
		}
		_, err = c.TryAcquire(ctx, "alone", time.Minute)
		require.NoError(t, err, "released: free again")
	})
}
