package schedpg_test

import (
	"bytes"
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/errfamily"
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
	var logs lockedBuffer
	s, err := schedpg.New(t.Context(), pool, scheduler.Options{Namespace: schema, Holder: "replica-a",
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
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
	// The lease client logs to the scheduler's Logger (lease_lost is where
	// the runbooks send operators): it logged nowhere.
	require.Contains(t, logs.String(), `"msg":"lease_acquired"`)
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

// lockedBuffer is a log sink safe for concurrent use.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string { b.mu.Lock(); defer b.mu.Unlock(); return b.b.String() }

// A nil context is refused with scheduler.ErrInvalidArgument before any
// I/O (Migrate dereferenced it: a panic, a fresh user's trial).
func TestNewRefusesANilContext(t *testing.T) {
	t.Parallel()
	var nilCtx context.Context
	_, err := schedpg.New(nilCtx, pgtest.OwnPool(t, nil), scheduler.Options{})
	require.ErrorIs(t, err, scheduler.ErrInvalidArgument)
	require.ErrorIs(t, err, errfamily.ErrNilContext)
}
