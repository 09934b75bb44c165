package leasetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/internal/testwait"
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
	var l *lease.Lease
	err := testwait.Poll(SlowAcquireRetryLimit, testwait.Interval, func() error {
		var err error
		l, err = c.TryAcquire(context.Background(), name, ttl, opts...)
		if !errors.Is(err, lease.ErrSlowAcquire) {
			return testwait.Stop(err)
		}
		t.Logf("leasetest: acquire %q: %v; trying again", name, err)
		return err
	})
	if err != nil {
		t.Fatalf("leasetest: acquire %q: %v", name, err)
	}
	return l
}
