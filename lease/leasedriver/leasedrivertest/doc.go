// Package leasedrivertest is the conformance suite of the lease backend
// seam (lease/leasedriver): every Backend (lease/redislease,
// lease/pglease, lease/quorum, leasetest's memory backend) runs Exercise,
// as riverqueue/river's drivers run riverdrivertest. Users who test code
// that holds leases want package lease/leasetest instead.
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
//		leasedrivertest.Exercise(t, leasedrivertest.RedisBackend(func(t *testing.T) redis.UniversalClient {
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
package leasedrivertest
