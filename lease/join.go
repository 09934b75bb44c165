package lease

import (
	"context"
	"time"

	"github.com/holdfast-go/holdfast/lease/internal/joinhooks"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
)

func init() {
	joinhooks.TryAcquireAll = func(ctx context.Context, client any, names []string, ttl time.Duration, acquire joinhooks.Acquire) ([]any, []error) {
		leases, errs := client.(*Client).tryAcquireAllWith(ctx, names, ttl, acquire)
		out := make([]any, len(leases))
		for i, l := range leases {
			out[i] = l
		}
		return out, errs
	}
	joinhooks.Backend = func(client any) leasedriver.Backend {
		if c, _ := client.(*Client); c != nil {
			return c.b
		}
		return nil
	}
	joinhooks.Release = func(ctx context.Context, l any, release func(context.Context, leasedriver.Held) error) error {
		return l.(*Lease).releaseWith(ctx, release)
	}
}
