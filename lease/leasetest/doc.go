// Package leasetest helps test code that holds leases from package lease:
// an in-memory lease backend for unit tests, freeze a holder past its TTL,
// expire its lease behind its back, run Redis in-process or as a
// test-owned server you can restart.
//
// # A lease backend in memory
//
// NewMemoryBackend returns a leasedriver.Backend that keeps its leases in a map:
// pass it to lease.NewWithBackend and the code under test takes, renews,
// waits for and loses leases as over Redis, without a server. TTLs run on
// the clock.Clock it is given (a clock.Fake moves them with Advance),
// tokens strictly increase per name, a release wakes waiters
// (leasedriver.Notifier), Expire frees a lease at once and Holder tells who holds
// it. It passes leasedrivertest.Exercise. See ExampleNewMemoryBackend.
//
// # Faults
//
// The fault fencing protects against is a holder that stops (GC pause, VM
// freeze, SIGSTOP) while its lease runs out, and then goes on writing. Three
// helpers recreate it inside one test process:
//
//   - Freeze(l) stops l's keep-alive and its local expiry: the holder keeps
//     believing it holds the lease, as a paused process does.
//   - ForceExpire deletes the lease key, as Redis expiring it would, so that
//     another acquirer succeeds at once.
//   - Thaw(l) resumes l: if its trust window passed meanwhile, l is lost at
//     once with lease.ErrExpired; otherwise its next renew finds the key gone
//     (lease.ErrNotHeld).
//
// A frozen holder's Context is not done, so its writes reach your sink with
// its old token: the sink must refuse them (fence.Check), and a test built
// from these helpers proves it does. See the package example.
//
// # Redis for tests
//
// NewMiniredisClient returns a client of an in-process miniredis. Its key
// expiry moves only when told (Miniredis.FastForward): call DriveClock to
// move it with the wall clock, so that TTLs run out as on a real server.
// StartRedis starts a real redis-server (from PATH) on a free loopback port,
// which a test can Kill, Restart (empty: no persistence), Pause and Resume.
//
// # Conformance
//
// The lease contract every backend must meet is checked by Exercise of
// package lease/leasedriver/leasedrivertest, for those who write a
// backend; this package is for those who use leases, as river splits
// rivertest from riverdrivertest.
package leasetest
