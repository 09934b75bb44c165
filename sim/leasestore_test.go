package sim

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver/leasedrivertest"
)

// The simulated lease store keeps the backend contract: it passes the
// conformance suite every lease backend passes (real time, no faults).
func TestLeaseStoreConformance(t *testing.T) {
	t.Parallel()
	leasedrivertest.Exercise(t, func(t *testing.T) leasedrivertest.Store {
		s := newLeaseStore(0, nil)
		return leasedrivertest.Store{
			NewClient: func(t *testing.T, opts lease.Options) *lease.Client {
				c, err := lease.NewWithBackend(s, opts)
				require.NoError(t, err)
				return c
			},
			Expire: func(_ context.Context, name string) error { s.expire(name); return nil },
			Inspect: func(_ context.Context, name string) (string, time.Duration, error) {
				s.mu.Lock()
				defer s.mu.Unlock()
				l, ok := s.live(name, time.Now())
				if !ok {
					return "", 0, nil
				}
				return l.owner, time.Until(l.expires), nil
			},
		}
	})
}
