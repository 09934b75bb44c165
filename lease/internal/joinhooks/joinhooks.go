// Package joinhooks lets lease/leasejoin reach the joined acquisition and
// release of a *lease.Client and a *lease.Lease without putting them on
// lease's user types. Package lease fills the functions in its init; they
// are never changed afterwards.
package joinhooks

import (
	"context"
	"time"

	"github.com/holdfast-go/holdfast/lease/leasedriver"
)

// Acquire makes the acquisitions of a joined batch.
type Acquire = func(context.Context, []leasedriver.AcquireRequest) ([]leasedriver.Grant, []error)

// TryAcquireAll is the joined TryAcquireAll of client (a *lease.Client);
// leases holds one *lease.Lease (or a nil one) per name. Release is the
// joined release of lease (a *lease.Lease).
var (
	TryAcquireAll func(ctx context.Context, client any, names []string, ttl time.Duration, acquire Acquire) (leases []any, errs []error)
	Release       func(ctx context.Context, lease any, release func(context.Context, leasedriver.Held) error) error
)

// Backend returns the backend of client (a *lease.Client), nil for a nil
// one.
var Backend func(client any) leasedriver.Backend
