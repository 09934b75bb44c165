// Package redislease is the lease backend on Redis: a single server, a
// Sentinel-managed primary or a Cluster, through any
// redis.UniversalClient. Backend implements leasedriver.Backend and its
// optional interfaces (Notifier, WaitingAcquirer, BatchAcquirer,
// BatchReleaser, Labeled, EvictionCounter, Inspector). It owns the key
// layout (Keys: every key of a lease carries the hash tag {name}), the Lua
// scripts (scripts/*.lua, run with EVALSHA and an EVAL fallback on
// NOSCRIPT), the pipelines of batched renewals, the pub/sub hand-off to
// waiters, the replica acknowledgements (Options.ReplicaAck) and the
// eviction-policy check (Options.Eviction).
//
// Most users never name it: lease.New(rdb, opts) builds a lease.Client on
// a Backend of this package. NewBackend builds one for
// lease.NewWithBackend, for the operator views (Inspect, List) and for a
// package that keeps keys beside the lease's (election's leader record,
// under Keys.Tagged) or takes leases in its own scripts (Joinable, with
// lease/leasejoin). See package lease for the state model, the trust
// window and the guarantees.
package redislease
