package schedhttp_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/leasejoin"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a
// log handler.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// The owner of a lease, with its token, is a write capability (issue 32):
// a full run cycle on real Redis (a held lease, a running attempt, a
// failed one, its retry succeeded) shows it in no view of the admin API
// (runs, one run, leases) and in no log event of the lease or the
// scheduler. They show its owner_id and the replica's holder label
// instead. The job function still gets the owner (Run.Owner), which sinks
// need.
func TestOwnerNeverLeavesTheProcess(t *testing.T) {
	t.Parallel()
	rdb := redistest.Real(t)
	prefix := redistest.Prefix(t, rdb)
	logs := &syncBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	leases, err := lease.New(rdb, lease.Options{Prefix: prefix + "lease:", Holder: "replica-a", Logger: logger})
	require.NoError(t, err)
	ldg, err := redisledger.New(rdb, redisledger.Options{Prefix: prefix + "ledger:"})
	require.NoError(t, err)
	sched, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ldg, Logger: logger})
	require.NoError(t, err)
	owners := make(chan string, 4)
	proceed, failed := make(chan struct{}), make(chan struct{})
	require.NoError(t, sched.Register(scheduler.Job{
		Name: "settle", Spec: "0 0 0 1 1 *", MaxAttempts: 2,
		Run: func(ctx context.Context, run scheduler.Run) error {
			owners <- run.Owner
			select {
			case <-proceed:
			case <-failed: // the test failed: let Stop drain
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
			if run.Attempt == 1 {
				return scheduler.Permanent(context.DeadlineExceeded) // fails; the operator retries
			}
			return nil
		},
	}))
	require.NoError(t, sched.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, sched.Stop(ctx))
	})
	t.Cleanup(func() { close(failed) }) // before Stop
	inspector, ok := leasejoin.Backend(leases).(leasedriver.Inspector)
	require.True(t, ok)
	h, err := schedhttp.New(sched, schedhttp.Options{Leases: inspector,
		Authorizer: func(*http.Request, schedhttp.Action, string) error { return nil }})
	require.NoError(t, err)

	newYear := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // a slot of the schedule, so that Retry takes it
	slots, err := sched.Backfill(context.Background(), "settle", "", newYear, newYear.Add(time.Hour), "test")
	require.NoError(t, err)
	require.Len(t, slots, 1)
	slot := slots[0]
	slotPath := "/jobs/settle/runs/" + url.PathEscape(slot.At.UTC().Format(time.RFC3339Nano))
	var seen []string // every view's body
	view := func(path string) string {
		t.Helper()
		body := get(t, h, path, http.StatusOK, nil)
		seen = append(seen, body)
		return body
	}

	first := <-owners
	require.Len(t, first, 32, "the job function gets the owner, for the sinks")
	leaseBody := view("/leases")
	require.Contains(t, leaseBody, `"owner_id":"`+fence.OwnerID(first)+`"`)
	require.Contains(t, leaseBody, `"holder":"replica-a"`)
	running := view(slotPath)
	require.Contains(t, running, `"owner_id":"`+fence.OwnerID(first)+`"`)
	require.Contains(t, running, `"holder":"replica-a"`, "the scheduler's label defaults to its lease client's")
	proceed <- struct{}{}
	waitStatus(t, h, slotPath, "failed")

	require.NoError(t, sched.Retry(context.Background(), "settle", "", slot.At, "again"))
	second := <-owners
	proceed <- struct{}{}
	waitStatus(t, h, slotPath, "succeeded")
	var run schedhttp.RunJSON
	get(t, h, slotPath, http.StatusOK, &run)
	require.Len(t, run.Attempts, 2)
	for i, owner := range []string{first, second} {
		require.Equal(t, fence.OwnerID(owner), run.Attempts[i].OwnerID, "attempt %d", i+1)
		require.Equal(t, "replica-a", run.Attempts[i].Holder, "attempt %d", i+1)
	}
	view(slotPath)
	view("/jobs/settle/runs")
	view("/jobs")
	view("/leases")

	text := logs.String()
	for _, owner := range []string{first, second} {
		for i, body := range seen {
			require.NotContains(t, body, owner, "view %d: %s", i, body)
		}
		require.NotContains(t, text, owner, "the logs")
		require.Contains(t, text, `"owner_id":"`+fence.OwnerID(owner)+`"`, "lease_acquired and job_claimed name the owner's id")
	}
	require.Contains(t, text, `"msg":"lease_acquired"`)
	require.Contains(t, text, `"msg":"job_claimed"`)
	require.Contains(t, text, `"holder":"replica-a"`)
	require.NotContains(t, text, `"owner":`)
}

// waitStatus polls the run at path until it has status.
func waitStatus(t *testing.T, h http.Handler, path, status string) {
	t.Helper()
	testwait.Until(t, 10*time.Second, path+" "+status, func() bool {
		var run schedhttp.RunJSON
		get(t, h, path, http.StatusOK, &run)
		return run.Status == status
	})
}
