// Package redisledger is the default ledger.Ledger, on Redis: every fenced
// transition is one Lua script (scripts/*.lua, embedded) that applies the
// acceptance rule to the fence of the transition's scope and writes the
// record; concurrent claims share round trips through an auto-pipeline.
// It implements the optional ledger.Canceler, ledger.ClearBeginner,
// ledger.PauseReader and ledger.Pruner.
//
// # Keys
//
// The records of one (job, partition) share the hash tag {job|partition}
// under the prefix (DefaultPrefix, "holdfast:ledger:"), so the ledger
// works on Redis Cluster (BeginIfClear, whose script also reads the
// job's pause flag under {job}, then always answers Clear == false). The
// unit scope's fence is the hash "fence", a slot scope's "fence:<unix>":
// the names, and every other key, are those of the format before fences
// were named by scope, so a store written by an older version keeps
// fencing after an upgrade. See Ledger for the full layout.
//
// # Retention
//
// Run hashes stay until Prune (ledger.Pruner) deletes those of done slots
// before a cutoff: a SCAN of the ledger's index keys, then per (job,
// partition) batches of PruneBatch slots, each one script on the pair's
// hash tag (Cluster-safe). Fences, horizons, last slots, cancel marks and
// pause flags stay: they are a few keys per pair, and a lost fence would
// let a stale holder write again. See docs/operations.md.
//
// # Durability
//
// Durability is Redis's: after a data loss (a restart without
// persistence, a failover that lost writes) the horizon starts again at
// the first State call, so slots from before the loss are never caught up.
// For an audit trail that survives, use pgledger.
package redisledger
