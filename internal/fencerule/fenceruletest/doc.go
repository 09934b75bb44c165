// Package fenceruletest is the case table of fence's acceptance rule that
// every implementation of it passes: fence.Accept in Go, fencerule.Lua on
// Redis (redisfence's writes, httpfence's Redis fence) and fencerule.Upsert
// on PostgreSQL (pgfence, httpfence's Postgres fence), and the
// scheduler's ledgers (redisledger, pgledger) through an Accept over their
// fence of (job, partition), raised by their transitions. Run drives
// an implementation through its own writes, so it tests the whole path:
// the token's encoding, the stored state, the comparison, and, with the
// Collisions, the naming of the state: fences whose parts a naive key
// would join into one key (or into another's state) must stay apart.
package fenceruletest
