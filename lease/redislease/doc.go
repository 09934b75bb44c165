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
// Concurrent acquire and release calls share round trips: a call made
// while fewer than 4 are on the wire is one plain command; one made while
// 4 or more are gathers the calls made meanwhile (it yields its processor once) and
// sends them in one pipeline at once; calls queue for an answer only when
// as many sends are on the wire as the client has pooled connections
// (go-redis Options.PoolSize, per master on a Cluster), so size the pool
// for the application's own commands and the Client's together
// (docs/design.md, section Leases).
//
// Most users never name it: lease.New(rdb, opts) builds a lease.Client on
// a Backend of this package. NewBackend builds one for
// lease.NewWithBackend, for the operator views (Inspect, List) and for a
// package that keeps keys beside the lease's (election's leader record,
// under Keys.Tagged) or takes leases in its own scripts (Joinable, with
// lease/leasejoin). See package lease for the state model, the trust
// window and the guarantees.
package redislease
