// Package leasedriver is the seam between package lease's Client and the
// stores that hold its leases: the Backend interface every store
// implements, the optional interfaces a Client uses when a backend offers
// them (Labeled, Notifier, WaitingAcquirer, BatchAcquirer, BatchReleaser,
// EvictionCounter), the values that cross the seam (AcquireRequest, Grant,
// Held) and the read-only operator view (Inspector, Info).
//
// Users of leases need none of it: they hold a lease.Client made by
// lease.New (on Redis) or lease.NewWithBackend. A package that stores
// leases somewhere (lease.RedisBackend, lease/pglease, lease/quorum,
// leasetest's memory backend) implements Backend and passes the
// conformance suite lease/leasetest.Exercise, as riverqueue/river's drivers
// implement riverdriver and pass riverdrivertest.
//
// The errors a backend returns (lease.ErrNotHeld, lease.ErrNotTried, ...)
// are package lease's, so that users match them there.
package leasedriver
