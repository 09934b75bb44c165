package lease_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver/leasedrivertest"
	"github.com/holdfast-go/holdfast/lease/leasetest"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

// newStore is the argument of leasedrivertest.Exercise.
type newStore = func(t *testing.T) leasedrivertest.Store

// TestConformance runs the lease contract (leasedrivertest.Exercise) on every
// kind of Redis deployment lease supports, the deployments and their
// checks in parallel.
//
// It does not call t.Parallel: the package's parallel tests, among them
// the timing-sensitive renewal of 10,000 leases, start only once it is
// done, so that its load does not eat into their trust windows.
func TestConformance(t *testing.T) {
	backends := map[string]func(t *testing.T) newStore{
		// miniredis with its clock driven by the wall clock, so that keys
		// expire as on Redis.
		"miniredis-driven-clock": func(*testing.T) newStore {
			return leasedrivertest.RedisBackend(func(t *testing.T) redis.UniversalClient {
				rdb, mr := leasetest.NewMiniredisClient(t)
				leasetest.DriveClock(t, mr)
				return rdb
			}, nil)
		},
		// A 3-master Cluster: every script touches the keys of one hash
		// tag only.
		"cluster": func(t *testing.T) newStore {
			cluster := redisproc.StartCluster(t, 3)
			return leasedrivertest.RedisBackend(func(t *testing.T) redis.UniversalClient { return cluster.Client(t) }, nil)
		},
		// A Sentinel-managed primary with one replica, which acknowledges
		// every acquire (WAIT). The replica is given 2 s: the default
		// 100 ms is a production latency budget, and a loaded test machine
		// (make test beside two busy loops, issue 11 part 7) overran it,
		// failing five checks at once with "acknowledged by 0 replicas".
		// The checks are about the lease, not about replication latency.
		"sentinel": func(t *testing.T) newStore {
			sentinel := redisproc.StartSentinel(t)
			return leasedrivertest.RedisBackend(
				func(t *testing.T) redis.UniversalClient { return sentinel.Client(t) },
				func(o *lease.Options) { o.ReplicaAck = redislease.ReplicaAck{Replicas: 1, Timeout: 2 * time.Second} })
		},
	}
	// The shared real Redis (REDIS_URL) and a plain miniredis, whose
	// keys expire only when told (NoExpiry).
	for _, b := range redistest.Backends() {
		backends[b.Name] = func(*testing.T) newStore {
			newStore := leasedrivertest.RedisBackend(func(t *testing.T) redis.UniversalClient { return b.New(t) }, nil)
			return func(t *testing.T) leasedrivertest.Store {
				s := newStore(t)
				s.NoExpiry = b.Name == "miniredis"
				return s
			}
		}
	}
	for name, backend := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			leasedrivertest.Exercise(t, backend(t))
		})
	}
}
