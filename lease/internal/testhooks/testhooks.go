// Package testhooks lets lease/leasetest and the tests of package lease
// reach into a *lease.Lease and a *redislease.Backend without widening
// their public APIs. Packages lease and lease/redislease fill the
// functions in their init; they are never changed afterwards.
package testhooks

import "github.com/holdfast-go/holdfast/internal/luascript"

// Freeze stops a lease's renewals and its local expiry, as a stop-the-world
// pause does; Thaw resumes both (a lease whose trust window passed is then
// lost at once). Both take a *lease.Lease.
var (
	Freeze func(lease any)
	Thaw   func(lease any)
)

// RedisIdle reports that a *redislease.Backend has no batched call on the
// wire and none waiting. RedisScripts returns the Redis backend's
// acquire, renew and release scripts.
var (
	RedisIdle    func(backend any) bool
	RedisScripts func() (acquire, renew, release *luascript.Script)
)
