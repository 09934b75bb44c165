package scheduler_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/miniconf"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger/ledgertest"
)

// With the default clock (clock.Real) the scheduler follows a
// testing/synctest bubble's fake time: a minute of per-second slots runs in
// no wall-clock time. miniredis serves the leases from outside the bubble.
func TestSchedulerFollowsSynctest(t *testing.T) {
	t.Parallel()
	mr := miniredis.RunT(t)
	miniconf.Register(mr)
	synctest.Test(t, func(t *testing.T) {
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		defer func() { _ = rdb.Close() }()
		leases, err := lease.New(rdb, lease.Options{})
		require.NoError(t, err)
		ledger := ledgertest.NewMemory()
		s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ledger})
		require.NoError(t, err)
		var ran []time.Time
		require.NoError(t, s.Register(scheduler.Job{Name: "bubble", Spec: "* * * * * *",
			Run: func(_ context.Context, run scheduler.Run) error { ran = append(ran, run.At); return nil }}))
		start := time.Now()
		require.NoError(t, s.Start(context.Background()))
		time.Sleep(time.Minute) // the bubble's fake minute: no wall-clock wait
		require.NoError(t, s.Stop(context.Background()))
		require.GreaterOrEqual(t, len(ran), 59, "a slot per fake second")
		for i, at := range ran {
			require.Equal(t, start.Truncate(time.Second).Add(time.Duration(i+1)*time.Second).UTC(), at)
		}
	})
}
