// Package redisfence makes fenced writes to state that lives in Redis: a
// write lands only if the fencing token that came with it passes the
// acceptance rule of package fence, checked in the same Lua script that
// writes, so nothing can slip in between.
//
// # Model
//
// A lease (package lease) hands its holder a token that grows with every
// acquisition. A holder that paused past its TTL still holds an old token;
// its late writes must be refused where they land. A writer presents a
// fence.Holder: the token, its owner, and its scope (the lease name the
// token was issued for). For each resource (a Redis key the holders write)
// and scope, a Writer keeps the highest token accepted and the owner that
// presented it, and accepts a write by holder (scope s, token t, owner o)
// iff, for the fence of s,
//
//	nothing stored yet, or t > stored token, or t == stored token and o == stored owner
//
// Otherwise it returns *fence.StaleTokenError (matching fence.ErrStaleToken)
// with Resource = the key, Scope = s, Presented = t, Current = the stored
// token, and writes nothing. Token 0 is refused with fence.ErrNoToken
// before Redis is contacted. A write under a slot scope whose slot was
// pruned is refused whatever its token (see "Pruning slot scopes").
//
// # Scope
//
// Tokens of different leases are unrelated sequences, so they are never
// compared: a key written under two scopes (two partitions of one
// scheduler job, say) has two fences, and neither holder refuses the
// other, while a stale holder of either lease is refused by its own
// lease's fence. "" is a scope of its own. Writers of several leases that
// must be fenced against each other present one shared Scope on purpose.
//
// Set, HSet and Eval each run as ONE Lua script: read the fence state,
// apply the rule, raise the state, write. Redis runs a script alone, so the
// check and the write are atomic, and one round trip does both.
//
// # Key layout
//
// A resource key K has one companion key, its fence key, in a key space
// of its own that no resource key can enter:
//
//	K                                 the caller's value (a string for Set, a hash for HSet, anything for Eval)
//	holdfast:redisfence:{<tag>}:K     FenceKey(K), a hash with one pair of fields per scope:
//	           {token: "<decimal uint64>", owner: "<owner>"}      for scope ""
//	           {token:<scope>: "<decimal>", owner:<scope>: "<owner>"}  for any other
//	         and one field per unit whose slot scopes were pruned:
//	           {closed:<unit>: "<unix seconds>"}                   the unit's watermark
//
// <tag> is K's Redis Cluster hash tag (the text between K's first '{' and
// the next '}', when not empty), or nothing when K has none. Namespace
// ("holdfast:", which holds FencePrefix "holdfast:redisfence:" and the
// default prefixes of holdfast's other Redis stores: lease
// "holdfast:lease:", redisledger "holdfast:ledger:", httpfence's
// redisstore "holdfast:idem:" and "holdfast:fence:") is reserved: a
// resource key, or any key of Eval, that starts with it is refused with
// ErrReservedKey (matching ErrInvalidKey) before Redis is contacted. A
// deployment that gave one of those stores a prefix outside "holdfast:"
// in the same Redis lists it in Options.Reserved (refused the same way);
// keep holdfast's prefixes under "holdfast:" or list them there. Only a
// key's own start counts, not its hash tag. So no resource is a fence key
// or another store's key, and no write, whatever its key, reaches a
// fence's, a lease's or a record's state (a resource
// named "K:fence" is a resource like any other, with a fence of its own).
// The encoding is injective: a tag never holds '}', so the first '}' after
// the prefix ends it and the rest is K; two keys never share a fence key.
// The fields are injective too: "token" for scope "" and "token:" + scope
// for any other never meet, nor do "owner" and "owner:" + scope, and
// "closed:" + unit, which starts with neither "token" nor "owner", is no
// scope's field whatever the unit or the scope.
//
// One hash per resource keeps every scope's fence in the resource's slot
// and retires with it. This layout replaces K + ":fence", which a resource
// named K + ":fence" could overwrite (issue 31); holdfast had no release
// with the old one, so nothing migrates. The stored format's version
// (the format-version issue) will cover this layout.
//
// On Redis Cluster both keys must hash to one slot, which holds when K
// carries a hash tag: "settlement:{2026-03-08}" and its fence key
// "holdfast:redisfence:{2026-03-08}:settlement:{2026-03-08}" hash by
// "2026-03-08". A Writer over a *redis.ClusterClient refuses keys without
// a tag (ErrInvalidKey) instead of failing with CROSSSLOT. Eval's other
// keys must share the tag too.
//
// The fence key has no TTL, even when Set gives the value one: if the fence
// state expired while a stale holder still ran, that holder's next write
// would be accepted. Delete K and FenceKey(K) together only once no holder can
// write K again (the resource is retired). Tokens are stored as canonical
// decimal strings and compared as such (the longer is the greater, equal
// lengths byte by byte), exactly over the whole uint64 range: the rule is
// the one Lua text every holdfast script shares (internal/fencerule), and
// passes the same case table as fence.Accept.
//
// # Scripts
//
// The Lua sources are embedded .lua files, each with a header naming its
// KEYS and ARGV; they run by EVALSHA with an EVAL fallback on NOSCRIPT,
// the calls of concurrent writes batched into pipelines (one round trip). A
// caller's own script becomes fenced with NewScript: its body runs only
// when the rule accepts, with KEYS and ARGV as the caller passed them.
//
// # Pruning slot scopes
//
// A scheduler job under OverlapAllow holds one lease per slot, named by a
// slot scope "<unit>@<unix seconds>" (fence.SplitSlotScope), such as
// "settle|eu@1772928000", so a resource it writes gains one fence, two
// fields, per slot, forever. Writer.PruneSlotScopes(ctx, K, unit, before) bounds them
// (fence.SlotScopePruner): in one script on FenceKey(K), it raises K's
// watermark for unit, field "closed:<unit>", to before (unix seconds,
// never lowered), then deletes the fences of unit's slot scopes whose slot
// is below the watermark. It closes exactly those scopes: slots at or
// after the watermark, the unit's own scope (the lease of a job under
// OverlapForbid, say), other units (also "U|x" beside "U") and scopes that
// only look like slot scopes ("U@0042", "U@+5") keep their fences.
//
// It is safe, with no window: a deleted fence's scope stays closed by the
// watermark in the same hash, and every write script (Set, HSet, Eval)
// reads that watermark in the same HMGET as the scope's fence and refuses
// a slot below it before the rule runs, whatever the token. So no stale
// holder of a pruned slot is ever accepted again, not even one that never
// wrote; the refusal is fence.ClosedScopeError, a *fence.StaleTokenError
// with ClosedBefore = the watermark, matching fence.ErrStaleToken and
// fence.ErrScopeClosed. A write under a scope that is no slot scope reads
// no watermark: its cost is unchanged. The scripts parse scopes in Lua by
// fence.SplitSlotScope's rule, byte for byte (a test holds them to it).
// Writer.Reset of a pruned scope finds no fence and does not reopen it.
//
// The cutoff: use the scheduler ledger's prune cutoff, or an older one. A
// slot before it is over for the ledger too (its Backfill and Retry refuse
// it), and a run of such a slot still going is refused from then on, so
// pick a cutoff beyond any run's length. A cutoff later than Redis's
// clock (TIME, read in the prune's script) minus fence.PruneMargin (1
// hour) is refused with nothing changed: a *fence.PruneCutoffError
// (fence.ErrPruneCutoff), as the ledger refuses it. Lease names of your
// own count: a scope shaped "U@123" is slot 123 of unit U here, and closes
// when U's slots before it are pruned. Watermarks below -10^15 s are
// stored as -10^15, which closes the same slots (none).
//
// Pruned as it goes, a resource's hash holds the kept slots' fences and one
// field per pruned unit. Each slot scope's fence ("settle|eu@<10 digits>",
// a 16-digit token, a 32-hex owner) takes about 100 bytes while the hash
// is a listpack (hash-max-listpack-entries: 512 built into redis-server,
// 128 in the shipped redis.conf) and about 210 bytes once it is a hash
// table: 200 unpruned slots made 20.6 KB, or 42.6 KB past the limit of
// 128; 10 kept slots and the watermark, 1.4 KB (TestPruneBoundsTheFenceHash
// logs the figures). A hash that grew into a hash table stays one after
// pruning (6.7 KB for those 21 fields), so prune from the start.
//
// Builds without PruneSlotScopes do not read the watermark: they accept a
// pruned slot's stale holder as a first write. Prune only once every build
// writing the resource reads it.
//
// # Errors
//
// Input errors match ErrInvalidKey (ErrReservedKey too for a key in the
// fence key space), ErrInvalidOwner, ErrInvalidTTL,
// ErrNoFields, ErrInvalidUnit or fence.ErrNoToken and are returned before
// Redis is contacted. Redis errors are wrapped with the key; when the context ended,
// its error is joined, so errors.Is finds context.Canceled or
// context.DeadlineExceeded. After a network error the write may or may not
// have been applied; running it again with the same token and owner is
// safe (the rule accepts the same holder again).
//
// # What is not guaranteed
//
//   - Writes to K that do not go through a Writer are not fenced.
//   - Redis does not roll back a script that fails halfway: an Eval body
//     that raises an error after writing leaves that write, and the raised
//     fence, in place; so does a write that Redis refuses after the rule
//     passed (HSet on a key that holds a string: WRONGTYPE), which leaves
//     the fence raised to its token and the value as it was. The token was
//     a genuine holder's, so no write is let in that the rule would refuse.
//   - Durability is the server's: a Redis restart without persistence, or a
//     failover to a replica that missed the last writes, can lose the fence
//     state along with the value. Lease tokens resume above every token
//     issued before (package lease), so a lost fence state accepts the
//     current holder again, but a stale holder's write racing the loss can
//     land.
package redisfence
