package schedpg_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/pgledger"
	"github.com/holdfast-go/holdfast/scheduler/schedpg"
)

// `holdfast ledger prune --before 2999-01-01T00:00:00Z` on the Postgres
// ledger: refused (ledger.ErrPruneCutoff), job_fences.pruned_before stays
// unset, and an OverlapAllow job keeps running.
func TestFuturePruneCutoffIsRefusedAndOverlapAllowRunsOn(t *testing.T) {
	t.Parallel()
	pool := pgtest.OwnPool(t, nil)
	schema := pgtest.Schema(t, pool, "schedpg_")
	s, err := schedpg.New(t.Context(), pool, scheduler.Options{Namespace: schema})
	require.NoError(t, err)
	var runs atomic.Int64
	require.NoError(t, s.Register(scheduler.Job{Name: "invoice", Spec: "* * * * * *", Overlap: scheduler.OverlapAllow,
		Run: func(context.Context, scheduler.Run) error { runs.Add(1); return nil }}))
	require.NoError(t, s.Start(t.Context()))
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	testwait.Until(t, 10*time.Second, "a first run", func() bool { return runs.Load() >= 1 })

	l, err := pgledger.New(pool, pgledger.Options{Schema: schema})
	require.NoError(t, err)
	cutoff := time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC)
	n, pruneErr := l.Prune(t.Context(), cutoff)
	require.Zero(t, n)
	_, _, previewErr := l.PrunePreview(t.Context(), cutoff, 10)
	after := runs.Load()
	testwait.Until(t, 10*time.Second, "three more runs after the refused Prune", func() bool { return runs.Load() >= after+3 })

	for _, err := range []error{pruneErr, previewErr} {
		require.ErrorIs(t, err, ledger.ErrPruneCutoff)
		require.ErrorContains(t, err, "2999-01-01T00:00:00Z")
	}
	var pruned int
	require.NoError(t, pool.QueryRow(t.Context(),
		`SELECT count(*) FROM `+schema+`.job_fences WHERE pruned_before IS NOT NULL`).Scan(&pruned))
	require.Zero(t, pruned, "no pair's prune cutoff written")
}
