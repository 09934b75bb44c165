package leasetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/lease"
)

// SlowAcquireRetryLimit bounds how long TryAcquire retries (10 s).
const SlowAcquireRetryLimit = 10 * time.Second

// TryAcquire is c.TryAcquire for tests that use short TTLs: it tries again
// while the grant is refused as too slow (lease.ErrSlowAcquire), which a
// loaded test machine causes when an acquire takes most of a 100 ms TTL,
// and fails the test on any other error, or when no try was fast enough
// within SlowAcquireRetryLimit. A refused grant leaves no key (the client
// deletes it), so each try finds the lease as the previous one did.
func TryAcquire(t testing.TB, c *lease.Client, name string, ttl time.Duration, opts ...lease.AcquireOption) *lease.Lease {
	t.Helper()
	deadline := time.Now().Add(SlowAcquireRetryLimit)
	for {
		l, err := c.TryAcquire(context.Background(), name, ttl, opts...)
		if err == nil {
			return l
		}
		if !errors.Is(err, lease.ErrSlowAcquire) || time.Now().After(deadline) {
			t.Fatalf("leasetest: acquire %q: %v", name, err)
		}
		t.Logf("leasetest: acquire %q: %v; trying again", name, err)
	}
}
