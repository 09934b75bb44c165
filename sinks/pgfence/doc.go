// Package pgfence enforces the fence acceptance rule in PostgreSQL, inside
// the caller's own transaction, so a business write commits only when the
// fencing token that came with it is fresh.
//
// # Model
//
// A lease (package lease) hands its holder a fencing token that grows with
// every acquisition. A holder can still be stale: it paused past its TTL and
// another replica took the lease and a larger token. pgfence is where such a
// holder is stopped. A writer presents a fence.Holder: its token, the owner
// of its acquisition and its scope, the lease name the token was issued
// for. A guard table keeps, per (resource, scope), the highest token
// accepted and the owner that presented it:
//
//	holdfast.fence_guard(resource text, scope text, token bigint, owner text, updated_at timestamptz,
//	                     primary key (resource, scope))
//
// A resource is any name the writers agree on ("settlement:2026-03-08",
// "account:42"); all writes that must be fenced against each other use the
// same one. Migrate creates the table (and adds the scope column to a table
// made before it existed; its rows get scope "", and a Check of the old
// version fails on the new key, SQLSTATE 42P10); New names it (Options).
// Migrations returns the same SQL as files for a migration tool, for a
// role without DDL rights (docs/operations.md).
//
// # Scope
//
// Tokens increase per lease name, and only there, so a token is only ever
// compared with tokens of the same scope: the partitions of a scheduler job
// (leases "job|tenant-a", "job|tenant-b", ...) writing one resource never
// refuse each other, while a stale holder of one partition is still refused
// by its own lease's row. "" is a scope of its own. To fence writers of
// several leases against each other, present one shared Holder.Scope on
// purpose (their tokens must come from one sequence).
//
// # The rule
//
// A write with token t and owner o is accepted iff, for its scope, t >
// stored, or t == stored and o == stored owner (the same holder writing
// again under one lease). Otherwise Check returns *fence.StaleTokenError,
// which matches fence.ErrStaleToken and carries the resource, the scope,
// the presented token and the current one. Token 0 (fence.None) is never accepted. See package fence.
//
// Check applies the rule and raises the stored token in one statement (an
// INSERT ... ON CONFLICT DO UPDATE ... WHERE), so no other writer can slip in
// between the check and the raise.
//
// # Usage
//
// Call Check first in the transaction that makes the business write, and
// roll back on any error:
//
//	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
//		if err := guard.Check(ctx, tx, "settlement:2026-03-08", run.Holder()); err != nil {
//			return err // rolled back: nothing of this attempt is committed
//		}
//		_, err := tx.Exec(ctx, "INSERT INTO settlements ...")
//		return err
//	})
//	if errors.Is(err, fence.ErrStaleToken) {
//		// Another holder with a newer token got there; stop working.
//	}
//
// The guard row stays locked by the transaction until it ends, so writers of
// one resource run one after another, and a writer whose token became stale
// while it waited is refused once the newer writer commits. Keep these
// transactions short. Checking first is not required for safety (a write
// made before a refused Check is rolled back with the transaction) but it
// takes the lock early and avoids wasted work.
//
// # Pruning slot scopes
//
// A scheduler job under OverlapAllow takes one lease per slot, named
// "<unit>@<unix seconds>" (a slot scope, fence.SplitSlotScope), so the
// guard gains a row per slot and resource that nothing would ever delete.
// PruneSlotScopes(ctx, db, resource, unit, before) bounds them: it raises
// the watermark of (resource, unit) in the table of closed slot scopes,
//
//	holdfast.fence_guard_closed(resource text, unit text, closed_before bigint,
//	                            updated_at timestamptz, primary key (resource, unit))
//
// ("<table>_closed", created by Migrate), and deletes the guard rows of
// unit's slot scopes before it. From then on Check refuses every write
// under such a scope, whatever its token, with a *fence.StaleTokenError
// whose ClosedBefore is the watermark (matching fence.ErrStaleToken and
// fence.ErrScopeClosed). Call it with the scheduler ledger's prune cutoff
// (scheduler.Options.Retention) or an older one: those slots are over for
// the ledger too.
//
// Why no stale holder of a pruned slot gets back in: deleting a guard row
// alone would reopen its scope (an empty fence accepts any token), so the
// scope is closed first, and every slot-scoped Check orders itself
// against that. In the caller's transaction, it first makes the (resource,
// unit) row of the closed table exist (INSERT ... ON CONFLICT DO NOTHING,
// which waits for a prune in flight), then, in the statement that raises
// its guard row, locks that row FOR SHARE and refuses a slot below its
// watermark. PruneSlotScopes raises the watermark under a FOR UPDATE lock,
// which waits for every such Check still open, and deletes the guard rows
// in a later statement of its transaction. So a Check either ends before
// the prune deletes its row (its write came first; its row, if the prune's
// snapshot missed it, stays refused below the watermark), or reads the
// raised watermark (READ COMMITTED), or fails with a serialization failure
// (REPEATABLE READ, SERIALIZABLE: the watermark changed under its
// snapshot; ErrRetryable, and run again it is refused). The tests show
// each case, and a control whose Check reads the watermark from its
// snapshot alone lets a stale token into a pruned slot. A slot-scoped
// Check costs one statement more than another Check (pipelined with it in
// a pgx.Tx and in CheckOwnTx: no round trip more); other scopes are
// unchanged.
//
// What it costs: the first slot-scoped Check of a (resource, unit) creates
// its watermark row, and the unit's other first Checks wait for that
// transaction to end (once per (resource, unit)). A PruneSlotScopes waiting
// for an open Check holds up the unit's new Checks, of every slot, behind
// it: it waits PruneLockTimeout (500 ms) at most, then fails (IsLockTimeout)
// with nothing changed, to be run again.
//
// A watermark cannot be lowered through the API (docs/operations.md,
// "Per-slot sink fences", says how by hand), so PruneSlotScopes refuses a
// cutoff later than the database's clock (now(), in its own transaction)
// minus fence.PruneMargin (1 hour), as the scheduler's ledger does, with
// a *fence.PruneCutoffError (fence.ErrPruneCutoff) and nothing changed: a
// cutoff in the future, or from a caller whose clock is ahead, would
// close the slot scopes of runs still going.
//
// A lease of your own named like a slot scope ("U@123") is slot 123 of
// unit U to the guard: pruning U closes it. The scheduler's job and
// partition names never hold '@'.
//
// # Fenced writes to the caller's own tables
//
// Where the fenced state is one row of the caller's table, the guard table
// can be left out: the row carries its own fence in three columns,
//
//	fence_token bigint, -- NULL or 0 until the first fenced write
//	fence_owner text,
//	fence_scope text    -- the scope of fence_token
//
// and FencedUpdate applies the rule and the write in one statement,
// UPDATE ... SET ..., fence_token = t, fence_owner = o, fence_scope = s
// WHERE key = k AND (fence_token IS NULL OR (fence_scope = s AND
// (fence_token < t OR (fence_token = t AND fence_owner = o)))). A row has
// one token, so one scope: a write under another scope is refused with
// ErrScopeMismatch rather than judged by comparing two leases' tokens, which
// would let a stale holder of lease A through whenever lease B wrote last.
// Give each lease its own rows, or use the guard table, which keeps a fence
// per scope. ErrScopeMismatch wraps fence.ErrScopeMismatch, so the
// scheduler records a job attempt that returns it failed for good
// (ledger.ClassPermanent): no retry presents another scope. A row with a token and a NULL fence_scope (written before the
// column existed: ALTER TABLE ... ADD COLUMN fence_scope text) is judged by
// its token alone, and the first accepted write records its scope. When no
// row changed, a follow-up read tells a stale row (*fence.StaleTokenError
// with the row's token), a row of another scope (ErrScopeMismatch) and a
// missing one (ErrRowNotFound) apart. FencedUpsert is the
// same for a row's first write: INSERT ... ON CONFLICT (key) DO UPDATE ...
// WHERE <rule>. Both take a pool, a connection or the caller's pgx.Tx, quote
// every identifier and pass every value as a parameter:
//
//	err := pgfence.FencedUpdate(ctx, tx,
//		pgfence.Row{Table: pgx.Identifier{"billing", "accounts"}, KeyColumn: "id", Key: 42},
//		map[string]any{"balance": 1250, "settled_on": day},
//		run.Holder())
//
// Under READ COMMITTED a concurrent writer of the row makes them wait and
// then judge the row as that writer left it; under REPEATABLE READ and
// SERIALIZABLE they fail with ErrRetryable instead. The row's guarantees are
// those of the guard row below, for the row: accepted writes commit in
// strictly increasing token order across owners.
//
// # Guarantees
//
//   - For one (resource, scope), the transactions that commit after a nil Check do
//     so in strictly increasing token order across owners: a writer never
//     commits after a writer with a larger token, and two owners never both
//     commit with one token. Only the same owner may commit the same token
//     again. Writers of different scopes are not ordered against each other.
//   - From a nil Check until its transaction ends, no other transaction can
//     pass Check for that (resource, scope): the guard row is locked.
//   - Bad input (empty names, token 0, a token above math.MaxInt64) is
//     refused without touching the database.
//
// # Non-guarantees
//
//   - Nothing is enforced if the caller commits after Check returned an
//     error, or makes the business write in another transaction or on
//     another database. The guarantee is exactly as wide as the transaction.
//   - A refused Check does not abort the transaction by itself; rolling back
//     is the caller's job (pgx.BeginFunc does it when the function returns
//     the error).
//   - Under REPEATABLE READ or SERIALIZABLE (the transaction's own, or the
//     database's default_transaction_isolation for a transaction that names
//     none), a concurrent writer of the same resource makes Check fail with
//     a serialization failure instead of waiting; it matches ErrRetryable
//     (and errors.As still finds the *pgconn.PgError, code 40001): roll
//     back and run the whole transaction again. IsRetryable also matches
//     one that COMMIT returns. READ COMMITTED waits. pgfence runs nothing
//     in a transaction of its own but Migrate's script, which sets READ
//     COMMITTED itself.
//   - Effects outside Postgres (emails, HTTP calls) are not fenced; use the
//     HTTP sinks or an idempotency key for those.
//   - Tokens are stored as bigint: tokens above math.MaxInt64 are refused
//     with ErrTokenOutOfRange (lease tokens stay below 2^53).
//
// # Errors
//
// A write under a closed slot scope is a *fence.StaleTokenError with
// ClosedBefore set (fence.ErrScopeClosed).
// Bad input matches ErrInvalidResource, ErrInvalidScope, ErrInvalidOwner,
// ErrTokenOutOfRange, ErrInvalidIdentifier or fence.ErrNoToken; New reports
// ErrInvalidOptions, and so does every call given a nil (or typed nil)
// database. FencedUpdate and FencedUpsert report a row of another scope with
// ErrScopeMismatch.
// FencedUpdate reports a missing row with ErrRowNotFound, never with a
// stale-token error. Database errors are wrapped: errors.As finds the
// *pgconn.PgError, and errors.Is(err, ErrRetryable) is true for a
// serialization failure or a deadlock, after which the whole transaction
// may be run again; IsRetryable also recognizes one that COMMIT returned.
package pgfence
