// Package leasedriver is the seam between package lease's Client and the
// stores that hold its leases: the Backend interface every store
// implements, the optional interfaces a Client uses when a backend offers
// them (Labeled, Notifier, WaitingAcquirer, BatchAcquirer, BatchReleaser,
// EvictionCounter), the values that cross the seam (AcquireRequest, Grant,
// Held) and the read-only operator view (Inspector, Info).
//
// Users of leases need none of it: they hold a lease.Client made by
// lease.New (on Redis) or lease.NewWithBackend. A package that stores
// leases somewhere (redislease.Backend, lease/pglease, lease/quorum,
// leasetest's memory backend) implements Backend and passes the
// conformance suite lease/leasedriver/leasedrivertest.Exercise, as riverqueue/river's drivers
// implement riverdriver and pass riverdrivertest.
//
// The errors a backend returns or checks (ErrNotHeld, ErrInvalidName,
// ErrInvalidOptions, ErrNilClient) are defined here and named by package
// lease too (lease.ErrNotHeld is ErrNotHeld), where users match them;
// CheckName and CheckHolder are the name and holder-label rules both
// apply. The trust window's rules live here too, for the client and for a
// backend that times its own acquisition (lease/quorum): MinTTL and
// CheckTTL (ErrInvalidTTL), Drift, and the *SlowAcquireError of a grant
// that came too late (ErrSlowAcquire); package lease names both errors. ErrNotTried is the answer of a joined acquisition
// (lease/leasejoin) that was not made.
package leasedriver
