package schedpg_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/schedpg"
)

// Issue 37, 6: one call gives a Scheduler on pglease and pgledger, their
// tables in the schema given; a triggered run goes through and is
// recorded under the replica's holder label.
func TestNewRunsAJobOnPostgres(t *testing.T) {
	t.Parallel()
	pool := pgtest.OwnPool(t, nil)
	schema := pgtest.Schema(t, pool, "schedpg_")
	s, err := schedpg.New(t.Context(), pool, scheduler.Options{Namespace: schema, Holder: "replica-a"})
	require.NoError(t, err)

	ran := make(chan string, 1)
	require.NoError(t, s.Register(scheduler.Job{Name: "invoice", Spec: "0 0 1 1 *",
		Run: func(_ context.Context, r scheduler.Run) error {
			ran <- r.IdempotencyKey
			return nil
		}}))
	require.NoError(t, s.Start(t.Context()))
	slot, err := s.Trigger(t.Context(), "invoice", "", "test")
	require.NoError(t, err)
	select {
	case key := <-ran:
		require.Equal(t, slot.Key(), key)
	case <-t.Context().Done():
		t.Fatal("the triggered run never ran")
	}
	require.NoError(t, s.Stop(context.Background()))
	rec, found, err := s.Record(context.Background(), "invoice", "", slot.At)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, ledger.StatusSucceeded, rec.Status)
	a, ok := rec.Latest()
	require.True(t, ok)
	require.Equal(t, "replica-a", a.Holder)

	var n int
	require.NoError(t, pool.QueryRow(t.Context(),
		`SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name IN ('leases', 'job_runs')`,
		schema).Scan(&n))
	require.Equal(t, 2, n, "pglease's and pgledger's tables in the schema")
}

func TestNewRefusesANilPool(t *testing.T) {
	t.Parallel()
	_, err := schedpg.New(t.Context(), nil, scheduler.Options{})
	require.ErrorIs(t, err, scheduler.ErrInvalidOptions)
}
