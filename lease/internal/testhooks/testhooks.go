// Package testhooks lets lease/leasetest reach into a *lease.Lease without
// widening lease's public API. Package lease fills the functions in its
// init; they are never changed afterwards.
package testhooks

// Freeze stops a lease's renewals and its local expiry, as a stop-the-world
// pause does; Thaw resumes both (a lease whose trust window passed is then
// lost at once). Both take a *lease.Lease.
var (
	Freeze func(lease any)
	Thaw   func(lease any)
)
