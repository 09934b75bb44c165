package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/faultproxy"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// A joined claim whose reply comes back after its leases' trust window
// (lease.ErrSlowAcquire) is undone, but its script began the slot and
// marked its claim group (redisledger's claim markers). The claim is
// retried a second later on its own, not in a batch that the marker
// would answer held: the retry takes the lease, finds the slot abandoned
// and runs it (attempt 2). On a real redis-server behind a proxy that
// delays the slow claim's requests.
func TestSlowJoinedClaimIsRetriedPastItsOwnClaimMarker(t *testing.T) {
	t.Parallel()
	srv := redisproc.Start(t)
	p, err := faultproxy.New(srv.Addr())
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	rdb := redis.NewClient(&redis.Options{Addr: p.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	direct := srv.Client(t)
	ctx := context.Background()

	leases, err := lease.New(rdb, lease.Options{Prefix: "lease:"})
	require.NoError(t, err)
	led, err := redisledger.New(rdb, redisledger.Options{Prefix: "ledger:"})
	require.NoError(t, err)
	sched, err := New(Options{Leases: leases, Ledger: led})
	require.NoError(t, err)
	require.NotNil(t, sched.joiner, "the joined claim")
	require.True(t, sched.grouped, "in claim groups, marked")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = sched.Stop(ctx)
	})

	// A slot every 5 s: the retry comes within the slot's lateness bound
	// (min(interval, maxLateness) = 5 s), so it is claimed on the fast
	// path, in a claim group (a later one is planned without a group). The
	// window starts a slot before the two the test runs (which is before
	// the ledger's horizon, never run), so both have a fire before them.
	next := time.Now().Truncate(5 * time.Second).Add(5 * time.Second)
	if time.Until(next) < 1500*time.Millisecond {
		next = next.Add(5 * time.Second)
	}
	next = next.UTC()
	slots := []time.Time{next, next.Add(5 * time.Second)}
	var runs runLog
	require.NoError(t, sched.Register(Job{
		Name: "job", Spec: "*/5 * * * * *", StartAt: next.Add(-5 * time.Second), EndAt: slots[1].Add(time.Second),
		MaxAttempts: 2, LeaseTTL: 2 * time.Second, Run: func(_ context.Context, r Run) error { runs.add(r); return nil },
	}))
	require.NoError(t, sched.Start(ctx))
	inspect, err := redisledger.New(direct, redisledger.Options{Prefix: "ledger:"})
	require.NoError(t, err)
	status := func(at time.Time) ledger.Status {
		rec, found, err := inspect.Get(ctx, ledger.Slot{Job: "job", At: at})
		if err != nil || !found {
			return ""
		}
		return rec.Status
	}
	testwait.Until(t, 10*time.Second, "the first slot succeeded", func() bool { return status(slots[0]) == ledger.StatusSucceeded })
	u := unitOf(t, sched, "job", "")
	testwait.Until(t, 5*time.Second, "the first slot's claim over", func() bool {
		u.mu.Lock()
		defer u.mu.Unlock()
		return !u.busy
	})

	// The second slot's claim: the proxy holds its requests from when they
	// are sent (at the fire) for 2.5 s, past its 2 s TTL's trust window, so its
	// grants come too late and are undone; its script has begun the slot
	// and set its group's marker (for 2 s) by then. The retry, a second
	// later (3.5 s after the fire: within the slot's lateness bound,
	// min(interval, maxLateness) = 5 s), comes while the marker is there.
	sent := p.Received(faultproxy.Upstream)
	p.Stall()
	testwait.Until(t, 10*time.Second, "the second slot's claim sent", func() bool {
		return p.Received(faultproxy.Upstream) > sent
	})
	require.WithinDuration(t, slots[1], time.Now(), 2*time.Second, "the claim is the second slot's")
	<-time.After(2500 * time.Millisecond) // the fault's length, not a wait for an event
	p.Resume()
	testwait.Until(t, 5*time.Second, "the slow claim's marker", func() bool {
		keys, err := direct.Keys(ctx, fmt.Sprintf(`ledger:claimed:\{%d\}:*`, slots[1].Unix())).Result()
		require.NoError(t, err)
		return len(keys) == 1
	})

	testwait.Until(t, 10*time.Second, "the second slot succeeded", func() bool { return status(slots[1]) == ledger.StatusSucceeded })
	rec, _, err := inspect.Get(ctx, ledger.Slot{Job: "job", At: slots[1]})
	require.NoError(t, err)
	require.Len(t, rec.Attempts, 2, "the slow claim's attempt, then the retry's")
	require.Equal(t, ledger.StatusAbandoned, rec.Attempts[0].Status)
	require.Equal(t, 1, runs.count("", slots[1]), "run once, by the retry")
}
