package scheduler_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// Issue 37, 6: one call gives a Scheduler on Redis leases and the Redis
// ledger; a triggered run goes through and is recorded under the
// replica's holder label, in the namespace given.
func TestNewRedisRunsAJob(t *testing.T) {
	t.Parallel()
	t.Run("Redis", func(t *testing.T) {
		t.Parallel()
		rdb := redistest.Real(t)
		ns := redistest.Prefix(t, rdb)
		var logs lockedLog
		s, err := scheduler.NewRedis(rdb, scheduler.Options{Namespace: ns, Holder: "replica-a",
			Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
		require.NoError(t, err)
		runOnce(t, s)
		// The lease client logs to the scheduler's Logger (lease_lost is
		// where the runbooks send operators): it logged nowhere.
		require.Contains(t, logs.String(), `"msg":"lease_acquired"`)
		require.Contains(t, logs.String(), `"msg":"job_run_finished"`)
		keys, err := rdb.Keys(t.Context(), ns+"*").Result()
		require.NoError(t, err)
		var leases, ledgers int
		for _, k := range keys {
			switch {
			case strings.HasPrefix(k, ns+"lease:"):
				leases++
			case strings.HasPrefix(k, ns+"ledger:"):
				ledgers++
			}
		}
		require.Positive(t, leases, "lease keys under the namespace: %v", keys)
		require.Positive(t, ledgers, "ledger keys under the namespace: %v", keys)
	})
	t.Run("Refusals", func(t *testing.T) {
		t.Parallel()
		_, err := scheduler.NewRedis(nil, scheduler.Options{})
		require.ErrorIs(t, err, scheduler.ErrInvalidOptions)
	})
}

// runOnce registers a job on s, starts s, triggers a run, waits for it,
// stops s and checks the ledger's record of it.
func runOnce(t *testing.T, s *scheduler.Scheduler) {
	t.Helper()
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
}
