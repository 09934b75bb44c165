// Package ledgertest is the conformance suite every ledger.Ledger meets,
// and Memory, a reference ledger in memory that doubles as a fake.
//
// # Exercise
//
// Exercise(t, newLedger) runs the contract of ledger.Ledger as parallel
// subtests of t, one per check. newLedger is called once per check, with
// the check's t, and returns the ledger to check (fresh, or shared: each
// check works on a job name of its own); a check of an optional interface
// the ledger does not implement is skipped with a message naming it. This
// is the shape of every conformance suite of holdfast (leasedrivertest.Exercise,
// sinktest.Exercise). The checks:
//
//   - attempts: Begin numbers attempts from 1; a Begin by another owner with
//     a larger token (the previous holder lost the lease) marks the running
//     attempt abandoned and starts the next; Finish records status, class,
//     error, finish time and RetryAt; a succeeded slot, a final failure
//     (zero RetryAt) and spent attempts (maxAttempts since the last
//     Request) make Begin return ledger.ErrSlotDone; Heartbeat records
//     the attempt's heartbeat;
//   - fencing, per (job, partition) (the unit scope, ledger.UnitScope): a
//     smaller token, or an equal one from
//     another owner, is refused on Begin, Heartbeat, Finish and Skip with a
//     *fence.StaleTokenError carrying the current token, and changes
//     nothing; a holder whose lease passed to another can write nothing
//     more, not even the end of its own attempt; token 0 is refused;
//     partitions have fences and records of their own; 16 holders racing
//     Begin on one slot are accepted in strictly increasing token order;
//   - per-slot fencing (the slot scope, ledger.SlotScope): each slot has
//     a fence of its own, so holders of different slots of one (job, partition)
//     interleave their Begins, Heartbeats and Finishes (where the pair's
//     fence would refuse the older one); on one slot the same rule holds
//     (refusals as above, a larger token takes a running attempt over and
//     fences its holder out of that slot); per-slot writes leave the
//     pair's fence as it is and pair-fenced writes leave every slot's
//     fence as it is; State reads per-slot begun, skipped and missed slots
//     as any other; a Begin carrying the planner's fence (Fence.Planner)
//     checks and raises the unit's fence too, so a planner that lost the
//     unit lease can no longer Skip;
//   - scopes: a Fence whose Scope is neither the slot's unit scope nor its
//     slot scope (another lease, another partition's unit, another slot,
//     "") is refused on every fenced transition with ErrUnknownScope and
//     changes nothing; a refusal's fence.StaleTokenError names the
//     refusing fence's Scope; a Planner rides only on a slot-scoped Fence,
//     with the unit scope (ErrInvalidFence, ErrUnknownScope);
//   - State: Open lists pending slots, failures with a retry whose slot
//     or retry time is at or after since, and slots running under a
//     holder that lost the lease (abandoned) whatever since says, oldest
//     first, with RetryAt; not succeeded, final, skipped,
//     missed or spent slots, nor a slot running under the current holder.
//     Last is the latest slot begun, skipped or missed; Horizon is set on
//     first use, from the caller's now (never the store's clock), and never
//     moves; Paused follows SetPaused for every
//     partition of the job;
//   - operators: Skip records skipped or missed with a reason and leaves a
//     slot with a record as it is; a missed slot awaits a Request; Request
//     makes any slot but a running one pending (ErrSlotRunning) with a
//     fresh attempt budget and records its reason, and makes a slot the
//     ledger never saw pending (backfill);
//   - reads: Get of an unknown slot is not found; List is newest first,
//     from inclusive, to exclusive, at most limit, records whole;
//   - the optional interfaces, on a ledger that implements them (skipped
//     otherwise): ledger.Canceler (a request for the running slot itself
//     cancels nothing, one for a later slot makes Heartbeat return
//     ErrCancelRequested) and ledger.ClearBeginner (begins only when
//     nothing else is due: no open or pending slot, no unseen slot before
//     Prev, not paused; ErrSlotDone and stale tokens answered as Begin
//     does), ledger.PauseReader (follows SetPaused per job, starts no
//     horizon) and ledger.Pruner (prune.go): on slots
//     of every state in two partitions, Prune deletes exactly the done
//     slots before the cutoff (succeeded, final failure, spent budget,
//     skipped, missed) but each pair's State.Last; Get finds none of them
//     and List skips them; every other record is unchanged; each pair's
//     State (Open, Last, Horizon, Paused) is the same after as before; a
//     retryable slot then begins its second attempt and the next slot its
//     first; on a ledger.PrunePreviewer, PrunePreview first lists exactly
//     those slots (and deletes nothing), at most its limit. Its slots are in January 2000, far before every other case's,
//     because Prune works on the whole store: a store shared with other
//     data loses its done records of slots before 2000-01-01T00:30Z, and
//     the State.Pruned of every pair it holds then rises to that cutoff;
//   - misuse: every method, the optional ones included, called with a nil
//     context returns an error matching ledger.ErrNilContext, never
//     panics, and writes nothing (no record, pause flag or open slot).
//
// The suite passes explicit now values and compares times at millisecond
// precision, so stores may truncate; slot instants have second precision
// (whole minutes in the suite). Tokens are realistic (TokenBase + n). The
// ledger under test receives real scopes: the suite builds its holders
// before it knows the slot they write and fills in each slot's scope per
// call.
//
// # What the contract leaves open
//
// The suite takes no side where ledger.Ledger's documentation does not:
// whether Skip of a slot with a record returns nil or ErrSlotDone (both
// pass), whether token 0 is refused with fence.ErrNoToken or as stale,
// what Begin repeated by the running attempt's own owner returns, what a
// StaleTokenError's Resource names (its Scope is fixed, its Resource is
// the store's name for the records), whether a taken-over slot whose attempts are spent is
// listed as open, and how an abandoned attempt's class and finish time are
// set.
//
// # Memory
//
// NewMemory returns a Ledger that keeps everything in maps behind one
// mutex. It meets Exercise (ledger.Canceler and ledger.Pruner included),
// and follows pgledger where the contract leaves
// a choice. Use it in tests of code that takes a ledger.Ledger.
package ledgertest
