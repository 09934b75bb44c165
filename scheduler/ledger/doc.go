// Package ledger is the scheduler's storage seam: the Ledger interface
// that records runs, its types and errors, and the names of the fences a
// ledger keeps. Implementations live beside it: redisledger (the default,
// on Redis), pgledger (on PostgreSQL); ledgertest holds the conformance
// suite every implementation runs (ledgertest.Exercise) and Memory, a
// reference ledger in memory that doubles as a fake. Package scheduler
// depends on this package only, never on a store.
//
// # Model
//
// A Slot is one scheduled execution: (job, instant with second precision,
// partition). A ledger keeps one Record per slot, its logical run, with
// every Attempt of it; Status moves as the Status type documents (pending,
// running, succeeded, failed, abandoned, skipped, missed). State is what
// a claim reads of one (job, partition): open slots, the latest slot seen,
// the horizon where the store's memory starts, the pause flag.
//
// # Fences and their scopes
//
// Every transition a lease holder makes (Begin, Heartbeat, Finish, Skip)
// presents a Fence: the holder of a lease (Scope, Token, Owner) and the
// ledger applies package fence's acceptance rule to the fence of that
// scope, because a token is only comparable with tokens of the same lease.
// A slot has two fences, named like the leases that write it:
//
//   - UnitScope(job, partition), "<job>" or "<job>|<partition>": the
//     lease of the (job, partition), under which a replica plans and runs
//     its slots. One fence for all of the pair's slots: a holder that lost
//     the lease can write to none of them once a newer holder wrote to any.
//   - SlotScope(slot), "<unit scope>@<unix seconds>": the lease of one slot
//     under OverlapAllow, where runs of one pair overlap. A slot-scoped
//     Begin also carries the planner's unit-scoped fence (Fence.Planner).
//
// Any other scope is refused (ErrUnknownScope). Job names and partition
// keys hold neither separator ('|', '@'; the scheduler refuses them), so
// the names are injective, as Slot.Key is.
//
// # Optional interfaces
//
// Canceler (needed by the OverlapCancelOther policy) and ClearBeginner (a
// fast path that begins an uncontended slot in the round trip that reads
// the ledger) stay public, and part of the tested contract rather than
// private to the Redis ledger: the scheduler, which lives in another
// package, must find them by a type assertion; ledgertest.Exercise checks
// each on every ledger that implements it (redisledger both,
// ledgertest.Memory Canceler), so a store of a user's own can add them and
// be held to the same rules. Pruner (retention: delete done records
// before a cutoff at least PruneMargin behind the store's clock, keeping
// what catch-up reads) is implemented by
// redisledger, pgledger and ledgertest.Memory and checked the same way.
// StatesReader (State of many pairs in one call, which the scheduler's
// recovery at Start reads in batches before it takes any lease) is
// implemented by redisledger and pgledger; without it, the recovery reads
// State unit by unit.
//
// # Errors
//
// ErrSlotDone, ErrSlotRunning and ErrCancelRequested are states; a
// refused token is a *fence.StaleTokenError (matching
// fence.ErrStaleToken) whose Scope names the refusing fence;
// ErrUnknownScope and ErrInvalidFence are a caller's mistake. Store errors
// are wrapped with the operation and the slot's Key.
package ledger
