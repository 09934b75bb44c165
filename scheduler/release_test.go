package scheduler_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/leasejoin"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger/ledgertest"
)

// unansweredRelease is a lease backend whose first failing releases get
// no answer, as from a Redis that just restarted (go-redis keeps a failed
// dial's error for up to a second): the key stays in place.
type unansweredRelease struct {
	leasedriver.Backend
	failing atomic.Int64 // releases still to fail
	failed  atomic.Int64
}

func (b *unansweredRelease) Release(ctx context.Context, h leasedriver.Held) error {
	if b.failing.Add(-1) >= 0 {
		b.failed.Add(1)
		return errors.New("dial tcp 127.0.0.1:6379: connect: connection refused (test)")
	}
	return b.Backend.Release(ctx, h)
}

// A release that got no answer left the unit's lease in Redis for its whole
// TTL (30 s by default): every claim of the unit, on every replica, found it
// held, and the slots of those 30 s ran nowhere (chaos scenario
// redis-data-loss lost up to 8 slots of a partition when a Begin and the
// release right after Redis came back both met a refused connection). The
// scheduler tries the release again with a short backoff, so the next
// slots run on time.
func TestReleaseWithoutAnswerIsTriedAgain(t *testing.T) {
	t.Parallel()
	rdb := redistest.Real(t)
	prefix := redistest.Prefix(t, rdb)
	inner, err := lease.New(rdb, lease.Options{Prefix: prefix})
	require.NoError(t, err)
	backend := &unansweredRelease{Backend: leasejoin.Backend(inner)}
	backend.failing.Store(2)
	leases, err := lease.NewWithBackend(backend, lease.Options{})
	require.NoError(t, err)

	var mu sync.Mutex
	ran := map[time.Time]bool{}
	first := time.Now().Truncate(time.Second).Add(time.Second).UTC()
	s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ledgertest.NewMemory()})
	require.NoError(t, err)
	require.NoError(t, s.Register(scheduler.Job{Name: "released", Spec: "* * * * * *", StartAt: first,
		LeaseTTL: 30 * time.Second, Run: func(_ context.Context, run scheduler.Run) error {
			mu.Lock()
			defer mu.Unlock()
			ran[run.Slot.At] = true
			return nil
		}}))
	require.NoError(t, s.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Stop(ctx))
	})

	// Four slots in a row, within 10 s: a lease left in place would hold
	// every claim off for 30 s after the first.
	testwait.Until(t, 10*time.Second, "four slots in a row ran", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range 4 {
			if !ran[first.Add(time.Duration(i)*time.Second)] {
				return false
			}
		}
		return true
	})
	require.Equal(t, int64(2), backend.failed.Load(), "two releases got no answer")
}
