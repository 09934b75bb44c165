// Package pgledger is a ledger.Ledger in PostgreSQL: the durable audit
// of every slot a scheduler ran, with the same fencing as the default Redis
// ledger.
//
// # Tables
//
// Migrate creates, in Options.Schema (default "holdfast"):
//
//	job_fences(job_name, partition_key, token, owner, horizon, last_slot, updated_at)
//	    PRIMARY KEY (job_name, partition_key)
//	job_slot_fences(job_name, partition_key, schedule_slot, token, owner, updated_at)
//	    PRIMARY KEY (job_name, partition_key, schedule_slot)
//	job_runs(id bigserial, job_name, schedule_slot timestamptz, partition_key, status,
//	    attempt, attempt_base, retry_at, reason, owner, fence_token, heartbeat_at,
//	    created_at, updated_at)
//	    UNIQUE (job_name, schedule_slot, partition_key)
//	job_run_attempts(job_run_id REFERENCES job_runs ON DELETE CASCADE, attempt, owner,
//	    fence_token, status, error_class, error, started_at, heartbeat_at, finished_at,
//	    holder)
//	    UNIQUE (job_run_id, attempt)
//	job_pauses(job_name PRIMARY KEY, paused, updated_at)
//
// Migrations returns the same SQL as NNN_name.up.sql files for goose,
// golang-migrate or atlas, for a role without DDL rights
// (docs/operations.md, "Migrations without DDL rights").
//
// One job_runs row is a slot's logical run; its job_run_attempts rows are
// the attempts, removed only by Prune (see Retention). attempt - attempt_base is how
// many attempts were made since the last Request, deferrals (class
// deferred, with a retry time) left out: that is what Begin compares with
// maxAttempts. retry_at is set for a failure that may be
// retried and NULL when it is final. Slot instants are stored at second
// precision (a Slot's identity); the times passed as now are stored as
// given (microseconds).
//
// State is one statement; States (ledger.StatesReader, which the
// scheduler's recovery at Start uses) reads many pairs in one statement
// over unnest'ed arrays, and a pair without a job_fences row yet with
// State, which creates it.
//
// # Fencing
//
// Every transition a lease holder makes (Begin, Heartbeat, Finish, Skip) is
// one READ COMMITTED transaction whose first statement applies the
// acceptance rule to the (job, partition) row of job_fences and raises it
// (for a per-slot fence, see below). It is pgfence's guard statement (one
// upsert, built by the same code):
//
//	INSERT INTO job_fences ... VALUES (job, partition, token, owner, ...)
//	ON CONFLICT (job_name, partition_key) DO UPDATE SET token = ..., owner = ...
//	 WHERE job_fences.token < EXCLUDED.token
//	    OR (job_fences.token = EXCLUDED.token AND job_fences.owner = EXCLUDED.owner)
//	RETURNING token
//
// No row back means the rule refused: the call returns a
// *fence.StaleTokenError (errors.Is fence.ErrStaleToken) carrying the
// current token, and the transaction is rolled back, so nothing changed.
// Otherwise the fence row stays locked until the transaction ends, and the
// job_runs and job_run_attempts writes follow in the same transaction. So,
// for one (job, partition):
//
//   - transitions commit one at a time, each seeing what the previous one
//     committed (every statement after the lock takes a fresh snapshot);
//   - once a holder with a larger token touched the ledger, a holder with a
//     smaller one can write nothing, for any slot of the pair, including the
//     slot it was running;
//   - two owners never both write under one token.
//
// # Per-slot fences
//
// A transition whose ledger.Fence has the slot's scope (ledger.SlotScope;
// OverlapAllow: runs of one (job, partition) overlap, each under a lease
// of its own slot, so tokens of different slots interleave) is fenced by
// the slot alone. It
// still locks the pair's job_fences row first (creating it, and so the
// horizon, if missing; a Begin raises last_slot there), so writers of one
// pair keep taking turns, but neither checks nor raises that row's token.
// Instead it applies the same rule, with the same upsert, to the slot's
// row of job_slot_fences:
//
//	INSERT INTO job_slot_fences ... VALUES (job, partition, slot, token, owner, now())
//	ON CONFLICT (job_name, partition_key, schedule_slot) DO UPDATE SET token = ..., owner = ...
//	 WHERE job_slot_fences.token < EXCLUDED.token
//	    OR (job_slot_fences.token = EXCLUDED.token AND job_slot_fences.owner = EXCLUDED.owner)
//	RETURNING token
//
// A refusal is a *fence.StaleTokenError whose Resource names the slot
// ("job_slot_fences(job, partition, slot)") and whose Current is the
// slot's token. So, per slot: a smaller token, or the same token from
// another owner, writes nothing to that slot, and a larger one takes a
// running attempt over (marks it abandoned) and fences its holder out of
// that slot; slots of one pair do not fence each other. The two kinds of
// fence are independent: a per-slot write leaves the pair's token as it
// is, and a pair-fenced write never touches job_slot_fences.
//
// The fence lives in a table of its own rather than in job_runs because it
// must be checked before a run exists (a refused Begin creates none), be
// raised by a Skip that leaves an existing record as it is, and outlive a
// retention job that deletes job_runs rows. job_slot_fences gets one row
// per slot written under a per-slot lease; Prune deletes a slot's row with
// its job_runs row, and the slot is then closed: a slot before its pair's
// pruned_before with no row of its own refuses every token (a deleted row
// alone would let any token write the slot again).
//
// # Operators and locks
//
// Operator actions are not fenced. Request still locks the fence row (it
// creates it with token 0 if missing), so it never interleaves with a
// transition; SetPaused writes job_pauses only. Locks are always taken in
// one order, the pair's fence row, then the slot's fence row (per-slot
// transitions), then the run row, so the ledger causes no deadlock.
//
// # Running slots and abandonment
//
// A running slot whose token is below the pair's fence (its slot's fence,
// for per-slot leases) was begun by a holder that has since lost the lease
// to one that touched the ledger: it is abandoned. State lists it as open,
// and the next Begin (by another owner) marks its attempt abandoned (class
// interrupted) and starts the next. A Begin repeated by the owner of the
// running attempt returns that attempt: a retry after a lost reply starts
// nothing.
//
// # Horizon
//
// The first call that touches a (job, partition) pair creates its fence
// row, and with it the pair's horizon: the now the caller passed (the
// scheduler's clock, not the database's now(), so one clock decides what
// is before the horizon and what is late), truncated to the second. It
// never changes afterwards. PostgreSQL does not lose its data the way a
// Redis without persistence does, so the horizon only says since when the
// ledger has known the pair.
//
// # Retention
//
// job_runs and job_run_attempts grow by one row per slot (and one per
// attempt) until Prune (ledger.Pruner) deletes the done ones before a
// cutoff (at least ledger.PruneMargin before the database's now()): succeeded, skipped, missed, abandoned and finally failed slots,
// in batched DELETEs of PruneBatch rows, their attempts going with them
// (ON DELETE CASCADE). It keeps what is still open (pending, running,
// failed with a retry), each pair's latest slot (job_fences.last_slot,
// State.Last), and never touches job_fences or job_pauses: a deleted
// pair fence row would let any token write again and start a new horizon.
// Of job_slot_fences it deletes only the rows of the slots it deletes,
// which are closed by the pair's pruned_before instead (below). Gap detection reads job_fences.last_slot, not
// job_runs, so a pruned slot is not seen as missed and not run again;
// Backfill or Retry of a pruned slot creates a new record. Choose the
// cutoff well beyond every job's CatchUpWindow and what operators look
// at; scheduler.Options.Retention or `holdfast ledger prune` calls it (see
// docs/operations.md). The job_slot_fences rows of the slots it deletes
// (OverlapAllow) go too, and those slots are closed (see Per-slot fences):
// under OverlapAllow, Backfill and Retry refuse slots before the cutoff.
//
// # Errors
//
// Bad input matches ErrInvalidArgument (or fence.ErrNoToken for token 0)
// and touches nothing; New reports ErrInvalidOptions. Database errors are
// wrapped: errors.As finds the *pgconn.PgError, and errors.Is(err,
// ErrRetryable) (the same value as pgfence.ErrRetryable) is true for a
// serialization failure or a deadlock, after which the call may be made
// again. ledger.ErrSlotDone and ledger.ErrSlotRunning are returned
// wrapped, as the contract says.
//
// pgledger meets ledgertest.Exercise (scheduler/ledger/ledgertest).
package pgledger
