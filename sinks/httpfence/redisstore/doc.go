// Package redisstore holds httpfence's stores in Redis: Store, the
// idempotency records (idemstore.Store), and Fence, the admission fence
// (idemstore.FenceStore). They live apart from httpfence so that the
// middleware does not import go-redis.
//
// Every operation is one Lua script on one key, run by EVALSHA with an EVAL
// fallback on NOSCRIPT, the calls of concurrent requests batched into
// pipelines (one round trip). Fence's scripts apply the acceptance rule
// every holdfast script shares (fence.Accept's rule in Lua: tokens compared
// exactly over the whole uint64 range as decimal strings). Both work with
// any redis.UniversalClient (single, Sentinel, Cluster).
//
// # Key layout
//
// Under the prefix (Options.Prefix), besides the format marker
// <prefix>format, every key is <prefix>{<hex sha256 of an input>}:
//
//   - Store: one hash per idempotency key, the input being the key.
//   - Fence, a scope that is no slot scope: one hash per (resource, scope),
//     input len(scope) ":" scope ":" resource, fields resource, scope,
//     token and owner.
//   - Fence, a slot scope "<unit>@<unix seconds>" (fence.SplitSlotScope,
//     the lease name of one slot of a scheduler job under OverlapAllow):
//     one hash per (resource, unit) for all of unit's slots, input "@"
//     len(unit) ":" unit ":" resource, fields resource and unit (for
//     operators), closed (the watermark, unix seconds, once pruned) and per
//     slot token:<slot> and owner:<slot>, slot in canonical decimal.
//
// A pair's input starts with a digit and a unit's with '@', and both are
// length-prefixed, so no two fences share a hash. Fence keys have no TTL.
//
// # Pruning slot scopes
//
// Under OverlapAllow every slot's lease is a scope of its own, so a fence
// per (resource, scope) would grow by one per slot for ever. Fence
// implements fence.SlotScopePruner: PruneSlotScopes(ctx, resource, unit,
// before) raises the unit hash's closed to before and deletes the fields
// of the slots below it, in one script; from then on Accept refuses those
// slots, whatever the token, with fence.ErrScopeClosed. A unit hash keeps
// three fields plus two per live slot.
//
// It is safe because the watermark sits in the same hash as the fences it
// closes, and every Accept of a slot scope reads it with the slot's fence
// (one HMGET) in the same script that raises the fence: Redis runs scripts
// one at a time, so no Accept can pass a watermark a prune set, nor write
// a field a prune deleted, and a stale holder of a deleted slot is never
// let back in. The hash is one key, so this holds on Cluster too, where a
// watermark in another key could not be read atomically.
//
// Prune with the cutoff the scheduler's ledger prunes at, or an older one:
// a slot before it is over for the ledger too, and a run of such a slot
// still going is refused from then on. A cutoff later than Redis's clock
// (TIME, read in the prune's script) minus fence.PruneMargin (1 hour) is
// refused with nothing changed, as the ledger refuses it: a
// *fence.PruneCutoffError (fence.ErrPruneCutoff). Lease names of your own shaped like
// "U@123" are slot scopes too (slot 123 of unit U) and close with U's
// slots; the scheduler's job and partition names never hold '@'.
package redisstore
