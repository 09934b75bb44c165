// Package pglease is a leasedriver.Backend on PostgreSQL: the leases of
// package lease, their fencing tokens and their TTLs kept in one table, for
// services that run Postgres and no Redis. With scheduler/ledger/pgledger and
// sinks/pgfence, the scheduler runs on Postgres alone.
//
//	b, err := pglease.New(pool, pglease.Options{})    // *pgxpool.Pool
//	err = b.Migrate(ctx)                             // once, idempotent
//	leases, err := lease.NewWithBackend(b, lease.Options{})
//
// # Model
//
// Migrate creates the table leases(name, owner, token, expires_at, holder) in
// Options.Schema (default "holdfast"); Migrations returns the same SQL as
// files for a migration tool, for a role without DDL rights
// (docs/operations.md). A lease called name is one row, created by its
// first acquisition and never deleted:
//
//   - Acquire is one statement, INSERT ... ON CONFLICT (name) DO UPDATE
//     ... RETURNING: the row is taken only when free or expired
//     (expires_at <= clock_timestamp()), and its token raised (to
//     max(last token + 1, the database clock in µs), below) in the same
//     statement. Two acquirers racing on one row serialise on its row
//     lock; the second sees the first's grant and takes nothing. A held row
//     is updated to itself, so that the statement returns the holder's
//     latest remaining TTL even when the grant committed after the
//     statement's snapshot; a failed try costs one dead row version (a HOT
//     update). The grant writes Options.Holder, the holder label views show
//     in place of the owner, into the row's holder column.
//   - Renew of a batch is one UPDATE ... FROM unnest(...): each row whose
//     owner still matches and which has not expired gets expires_at =
//     clock_timestamp() + ttl. An expired lease is never re-created by a
//     renewal, even when nobody took it since (as a Redis key that expired
//     is gone).
//   - Release sets owner ” and expires_at '-infinity' where the owner
//     matches and the lease has not expired; the token stays.
//
// # Clocks and tokens
//
// TTLs run on the database clock (clock_timestamp(), not now(): a
// statement in a long transaction must not see an old time). The holder's
// trust window runs on its own monotonic clock from the start of its call,
// as with the Redis backend: lease.Client measures it, and this package
// adds nothing to it. The token is the row's counter, set in the granting
// statement to max(last token + 1, the database clock in µs), as the
// Redis backend does with Redis TIME: strictly increasing per lease name
// across acquisitions and restarts of the database (a committed row), and
// not regressing when the row is deleted or restored from an old backup,
// assuming the database host's clock is not stepped back meanwhile.
// Tokens of one lease name are compared only with each other, by the sinks
// (fence.Holder.Scope is the lease name).
//
// # Hand-off
//
// The backend is no leasedriver.Notifier: a waiting Acquire polls, retrying when
// the holder's remaining TTL (returned by the failed try) runs out,
// bounded by lease.Options.RetryMin and RetryMax. A release therefore
// wakes no waiter at once; the next holder takes over within RetryMax of
// a release, and within the holder's TTL of a crash.
//
// LISTEN/NOTIFY was left out on purpose. A LISTEN belongs to a session, so
// a listening waiter must hold a connection of its own for its whole wait
// and must not hand it back to the pool while it listens (the same rule
// as for a session advisory lock, docs/techniques.md). One connection
// per waiting Acquire taken from the pool lets a few waiters exhaust it
// and starve the renewals of the leases already held; one shared listener
// per Backend needs a goroutine and a Close the Backend does not have.
// Polling costs one statement per waiter per retry.
//
// # What it needs from the database
//
// DB is satisfied by *pgxpool.Pool. Every call is one statement on any
// pooled connection, in a READ COMMITTED transaction of its own, whatever
// the database's default_transaction_isolation: sent alone where that
// default is READ COMMITTED (each statement writes only at READ
// COMMITTED), otherwise pipelined with BEGIN ISOLATION LEVEL READ
// COMMITTED and COMMIT (one round trip either way, two for the first
// statement at another level; a DB without Query and QueryRow always gets
// the pipelined form). Nothing is held on a session, so a connection can
// go back to the pool between calls (unlike pg_try_advisory_lock, which
// belongs to the session that took it). Under
// a REPEATABLE READ or SERIALIZABLE default the bare statement would fail
// with 40001 whenever tries race, and competitors' failed tries would make
// the holder's renewals fail (docs/guarantees.md, "Postgres isolation
// levels"). Batch acquisition (lease.Client.TryAcquireAll) is one
// statement per name.
package pglease
