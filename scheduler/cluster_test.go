package scheduler

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// On a 3-master Redis Cluster, 3 replicas run every slot exactly once with
// the fast path on: the joined claim takes each unit's lease and begins
// its slot in one script (the unit's lease and records share a hash
// slot), for partitioned jobs and for the "" partition alike.
func TestClusterRunsEverySlotOnceOnTheFastPath(t *testing.T) {
	t.Parallel()
	cluster := redisproc.StartCluster(t, 3)
	start := time.Now().Truncate(time.Second).Add(3 * time.Second)
	const slotsPerUnit = 3
	type jobSpec struct {
		name  string
		parts []string
	}
	jobs := []jobSpec{{"plain", nil}, {"daily", nil}, {"split", []string{"eu", "us", "ap"}}, {"shard", []string{"0", "1"}}}
	units := 0
	for _, j := range jobs {
		units += max(len(j.parts), 1)
	}
	var (
		mu   sync.Mutex
		runs = map[string]int{}
	)
	fn := func(_ context.Context, r Run) error {
		mu.Lock()
		defer mu.Unlock()
		runs[r.IdempotencyKey]++
		return nil
	}
	var counters []*countingLedger
	for range 3 {
		rdb := cluster.Client(t)
		leases, err := lease.New(rdb, lease.Options{Prefix: "cl:lease:"})
		require.NoError(t, err)
		l, err := redisledger.New(rdb, redisledger.Options{Prefix: "cl:ledger:"})
		require.NoError(t, err)
		counting := &countingLedger{Ledger: l}
		counters = append(counters, counting)
		s, err := New(Options{Leases: leases, Ledger: counting})
		require.NoError(t, err)
		require.NotNil(t, s.joiner, "the ledger joins the leases on Cluster")
		for _, j := range jobs {
			require.NoError(t, s.Register(Job{
				Name: j.name, Spec: everySecond, Partitions: j.parts, LeaseTTL: 5 * time.Second,
				StartAt: start, EndAt: start.Add(slotsPerUnit * time.Second), Run: fn,
			}))
		}
		require.NoError(t, s.Start(context.Background()))
		t.Cleanup(func() { require.NoError(t, s.Stop(context.Background())) })
	}
	want := units * slotsPerUnit
	testwait.Until(t, time.Until(start)+30*time.Second, fmt.Sprintf("%d slots run", want), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(runs) == want
	})
	mu.Lock()
	defer mu.Unlock()
	for key, n := range runs {
		require.Equal(t, 1, n, "slot %s ran %d times", key, n)
	}
	begun := 0
	for _, c := range counters {
		c.mu.Lock()
		begun += c.clear
		c.mu.Unlock()
	}
	// Every slot after a unit's first few may begin on the fast path; a
	// slot a replica found busy goes by the plan. Most take the fast path.
	require.Greater(t, begun, want/2, "slots begun by the joined claim")
}
