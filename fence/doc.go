// Package fence holds the fencing token, the one rule every sink uses to
// accept or reject a write, and the typed error for a stale token.
//
// # Why fencing
//
// A lease (see package lease) cannot give mutual exclusion on its own: a
// holder that pauses (GC, VM freeze, network stall) past its TTL keeps
// running after someone else acquired the lease. Kleppmann ("How to do
// distributed locking", 2016) and the Chubby paper (Burrows, OSDI 2006,
// "sequencers") give the remedy used here: every acquisition gets a token
// that is strictly larger than every token issued before for the same lease
// name, the holder sends it with every write, and the place where the write
// lands refuses any token smaller than one it has already seen.
//
// # Scope
//
// Tokens are strictly increasing per lease name, and only there: the
// tokens of two leases are two unrelated sequences. So a token travels with
// its scope, the name of the lease it was issued for, in a Holder (Scope,
// Token, Owner), and a sink keeps one fence per (resource, scope). Two
// leases writing one resource (the partitions of a scheduler job calling
// one endpoint, say) never refuse each other; a stale holder of one lease is
// still refused by its own lease's fence. "" is a scope of its own. To fence
// writers of several leases against each other, present one shared Scope on
// purpose (their tokens must then come from one sequence): there is no
// global switch.
//
// Choosing a scope: every holder of one lease must present the same Scope
// (Lease.Holder and scheduler.Run.Holder do). A scope shared too widely is
// safe, since a fence keeps the highest token of all its writers and only
// refuses more (writers of unrelated sequences refuse each other at
// random); one lease whose holders present different scopes (a Holder
// built by hand without its Scope next to one with it, an old and a new
// version of a service) is not fenced at all across them.
//
// # Slot scopes
//
// A scheduler job under OverlapAllow takes a lease per slot, so its runs
// write under a scope per slot, "<unit>@<unix seconds>" (SplitSlotScope),
// and every sink would keep a fence per slot for ever. A sink that
// implements SlotScopePruner bounds them: PruneSlotScopes raises a
// watermark per (resource, unit) and deletes the fences of the unit's slots
// below it, and from then on refuses any write under such a slot's scope,
// whatever its token (a *StaleTokenError with ClosedBefore set, matching
// ErrScopeClosed). Deleting the fences without the watermark would reopen
// them: an empty fence accepts any token, the stale holder's included. The
// watermark never goes down, so a cutoff later than the store's clock
// minus PruneMargin (1 hour) is refused (ErrPruneCutoff, PruneCutoffError),
// changing nothing: it would close the scopes of runs still going.
//
// # The acceptance rule
//
// A sink keeps, per (resource, scope), the highest token it accepted and the
// owner that presented it. A write with token t and owner o is accepted iff
//
//	t > stored, or t == stored and o == stored owner
//
// and is rejected with *StaleTokenError (matching ErrStaleToken) otherwise.
// Token 0 means "no token" and is never accepted (ErrNoToken). The check and
// the write must commit atomically: same SQL statement or transaction, same
// Lua script. Accept, Check and Holder.Check implement the rule; sinks
// embed it in their own storage.
//
// # Carriage
//
// WithHolder and HolderFromContext carry a Holder in a context.Context, so
// code far from the lease (an HTTP client, a repository layer) can fence
// its writes; a lease's Context carries its holder already. Token.String
// and ParseToken are the token's text form, a decimal uint64 without sign
// or leading zeros, in which the sinks store and send it (httpfence's
// Fencing-Token header among them).
package fence
