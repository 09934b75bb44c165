// Package leasetest helps test code that holds leases from package lease:
// an in-memory lease backend for unit tests, freeze a holder past its TTL,
// expire its lease behind its back, run Redis in-process or as a
// test-owned server you can restart, and check that a lease store meets
// the lease contract.
//
// # A lease backend in memory
//
// NewMemoryBackend returns a leasedriver.Backend that keeps its leases in a map:
// pass it to lease.NewWithBackend and the code under test takes, renews,
// waits for and loses leases as over Redis, without a server. TTLs run on
// the clock.Clock it is given (a clock.Fake moves them with Advance),
// tokens strictly increase per name, a release wakes waiters
// (leasedriver.Notifier), Expire frees a lease at once and Holder tells who holds
// it. It passes Exercise. See ExampleNewMemoryBackend.
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
// # Exercise
//
// Exercise(t, newStore) runs the lease contract as parallel subtests of t,
// one per check. newStore is called once per check, with the check's t,
// and returns a fresh Store: how to make Clients over the store, how to
// expire a lease behind their backs and, optionally, how to inspect it,
// count its commands, and whether it notifies releases and expires keys
// on its own; a check that needs what the Store lacks is skipped with a
// message naming it. This is the shape of every conformance suite of
// holdfast (ledgertest.Exercise, sinktest.Exercise). RedisBackend returns
// the newStore of the built-in Redis backend over a deployment of yours
// (a single server, Sentinel, Cluster, a proxy, a Redis-compatible
// server); any other leasedriver.Backend is described by a Store of its own:
//
//	func TestLeaseOnOurCluster(t *testing.T) {
//		leasetest.Exercise(t, leasetest.RedisBackend(func(t *testing.T) redis.UniversalClient {
//			rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
//			t.Cleanup(func() { _ = rdb.Close() })
//			return rdb
//		}, nil))
//	}
//
// The checks, named after what they prove: racing acquirers, exactly one
// wins; a failed try is one command; tokens strictly increase; a non-owner's
// renew and release change nothing; release is idempotent and cancels the
// lease with lease.ErrReleased; the keep-alive holds a lease past its TTL;
// an expired lease is reported lost with lease.ErrNotHeld at the next
// renewal, while a new acquirer gets it at once; a lease nobody renews is
// freed by the store once its TTL passes; the end of the lifetime
// context (lease.WithLifetime) loses the lease with lease.ErrParentDone
// and frees it long before its TTL; the context of the acquire call bounds
// the wait only (the lease outlives it and keeps its values); a waiter is
// woken by the holder's release, not by polling; Acquire gives up when its
// context ends, with both errors; bad input gets typed errors without
// reaching the server; a frozen holder is lost with lease.ErrExpired when
// thawed after its trust window; TryAcquireAll answers each name of a
// batch (the free ones taken, the held and the invalid ones reported) with
// ordinary leases; the holder label (lease.Options.Holder) is stored with
// each acquisition and is always the current holder's.
//
// No check sleeps: each waits for a signal or polls with a deadline.
package leasetest
