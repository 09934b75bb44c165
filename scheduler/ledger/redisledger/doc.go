// Package redisledger is the default ledger.Ledger, on Redis: every fenced
// transition is one Lua script (scripts/*.lua, embedded) that applies the
// acceptance rule to the fence of the transition's scope and writes the
// record; concurrent claims share round trips through an auto-pipeline.
// It implements the optional ledger.Canceler, ledger.ClearBeginner,
// ledger.PauseReader, ledger.StatesReader, ledger.Pruner and
// ledger.LeaseJoiner.
//
// # Joined transitions
//
// With the scheduler's leases on the ledger's own client
// (redislease.Backend.Joinable), ClaimAll takes the unit leases of a batch
// and begins each slot due on time under the token its script just
// issued (one script per batch on a single server or Sentinel, one per
// unit on Cluster), and FinishRelease records a run's outcome and releases
// its lease in one script. The FinishRelease calls of runs that end
// together are joined (off Cluster, whose units' keys lie in different
// slots): while two joined finish calls are on the wire, the runs that end
// meanwhile wait and go in the next one (scripts/finishall.lua, at most 256
// runs per script call), each with its own answer: a stale token or a
// store error of one run (a key of the wrong type) is that run's alone. A
// lone run's end is one finishrelease.lua call, as before. The lease's transitions are internal/leaselua's
// functions, the ones the lease package's own scripts run, and the begin
// is fenced as Begin is: the safety rules are unchanged, the scripts fewer.
// ClaimAll reads a unit's run record before its lease: a slot already done
// (nothing pending for the unit) is answered done with no lease taken and
// no token issued, and one running under another holder whose lease key
// another owner holds is answered held, so the replicas that lose a slot
// pay two or three reads each rather than an acquisition (and, for a slot
// done, its begin and release).
//
// # Claim markers
//
// ClaimAll cuts its requests into claim groups (ledger.ClaimGroupEnds:
// about 16 units, the same groups on every replica) and, once every unit
// of a group was tried, sets the group's marker,
// <prefix>claimed:{<unix>}:<hash>, for the group's shortest lease TTL, 5 s
// at most (a claim begins a slot only within 5 s of it). Off Cluster the
// script that tried the units sets it; on Cluster, where each unit is a
// script of its own, one pipeline sets the markers of the groups whose
// units all answered, after the scripts did. A later ClaimAll of the same
// group (the same units, slots and order) on another replica reads the
// markers first (one MGET per instant, in the pipeline that reads the
// pause flags on Cluster) and answers the units of a marked group held,
// with Remaining 0 (unknown), without trying them: the replicas that lose
// a slot pay a share of one read, not a script's reads per unit. A marker
// stands for the answers tries of its units would have had when they were
// made (held, or done); it is a hint that no write reads, so the leases
// and fences decide every run as before. A unit whose holder lost its
// lease within the marker's TTL is taken over at its next claim, as when
// a try found the lease still held.
//
// # Keys
//
// The records of one (job, partition) share one hash tag, the name of its
// unit lease ({job|partition}, {job} for the "" partition), under the
// prefix (DefaultPrefix, "holdfast:ledger:"), so the ledger works on
// Redis Cluster and a unit's lease and records share a slot. On Cluster
// BeginIfClear, whose script also reads the job's pause flag under {job},
// always answers Clear == false; ClaimAll reads the pause flags first. A
// unit's fence (the unit scope's), last slot, horizon and hot run share
// one hash, "unit"; a slot scope's fence is the hash "fence:<unix>". See
// Ledger for the full layout.
//
// # The hot run
//
// A slot begun by a claim (ClaimAll, BeginIfClear) of a unit with nothing
// else open, pending or waiting for a retry, the case of nearly every
// slot of a recurring job, is the unit's hot run: its first attempt is
// written in the unit hash, in the same HSET that raises the fence and
// records the last slot, and its run hash and index entry are written
// once, at its end, by the finish (the joined finish and release too).
// So a slot costs the server two writes of one hash each where it took
// seven keys' writes (scripts/fence.lua). Anything else that touches the
// unit while it runs (a Begin, a claim by another owner, a skip, a
// request, a finish or heartbeat that is not its owner's) first writes it
// out as a cold run, with its run hash, open and index entries, and the
// rest of that script reads them as ever; Get, List and State read the
// hot run where it is. The fence is the same hash either way, so the
// acceptance rule and its scope are unchanged.
//
// # Retention
//
// Run hashes stay until Prune (ledger.Pruner) deletes those of done slots
// before a cutoff (at least ledger.PruneMargin before Redis TIME): a SCAN of the ledger's index keys, then per (job,
// partition) batches of PruneBatch slots, each one script on the pair's
// hash tag (Cluster-safe). Unit hashes (fence, horizon, last slot), cancel
// marks and pause flags stay: they are a few keys per pair, and a lost
// fence would let a stale holder write again. See docs/operations.md.
//
// # Durability
//
// Durability is Redis's: after a data loss (a restart without
// persistence, a failover that lost writes) the horizon starts again at
// the first State call, so slots from before the loss are never caught up.
// For an audit trail that survives, use pgledger.
package redisledger
