// Package scheduler runs cron jobs across replicas so that each scheduled
// slot runs once, under a fenced lease, with every attempt recorded in a
// ledger.
//
// # Overview
//
// Every replica of a service creates a Scheduler over the same Redis,
// registers the same jobs and calls Start. When a slot of a job comes due
// every replica tries to take the lease of that (job, partition); the one
// that gets it runs what is due and the others skip. The lease gives
// liveness (one replica usually does the work); safety comes from the
// fencing token that comes with the lease: the ledger refuses a transition
// from a holder whose token has been superseded, and so must every sink the
// job writes to (package fence).
//
//	leases, _ := lease.New(rdb, lease.Options{})
//	runs, _ := redisledger.New(rdb, redisledger.Options{}) // or pgledger, or a store of your own
//	s, _ := scheduler.New(scheduler.Options{Leases: leases, Ledger: runs})
//	_ = s.Register(scheduler.Job{Name: "daily-settlement", Spec: "0 2 * * *",
//		Zone: "Europe/Paris", Partitions: []string{"eu", "us"}, Run: settle})
//	_ = s.Start(ctx)
//	defer s.Stop(shutdownCtx)
//
// # Slots and partitions
//
// A Slot is (job name, scheduled instant in UTC at second precision,
// partition). It is computed from the schedule (package cron, including its
// DST rules), never from the clock of the replica whose timer fired:
// replicas whose timers fire seconds apart, or a replica restarted after
// the slot, claim the same Slot. Run also carries the slot's local time,
// zone and business date (the local date), and Slot.Key,
// "job:2006-01-02T15:04:05Z:partition", as the idempotency key to give to
// sinks: the same for every attempt of the slot, on every replica.
//
// Job.Partitions splits every slot by tenant (default: one partition, "").
// Each (job, partition) is a unit of its own: its own lease (named
// "job|partition"), ledger records, fence and retries (Pause applies to
// every partition of a job), so a slow tenant never holds up another and
// the partitions of one slot run in parallel, on one replica or spread
// over several, within Options.MaxConcurrentClaims claims per replica
// (default 64).
//
// # Claim procedure
//
// One goroutine per Scheduler keeps a timer heap of every unit: its next
// fire, and wake-ups (a retry falls due, an operator asked for a run). When
// an entry comes due it hands a claim of the unit to a bounded pool; a unit
// has at most one claim at a time on a replica (a fire that arrives during
// one is noted and claimed right after). A claim:
//
//  1. calls lease.Client.TryAcquire once, without waiting (scheduled fires
//     due together share lease.Client.TryAcquireAll batches, each no larger
//     than the free places in the pool). A replica that does not get the
//     lease logs job_claim_skipped (reason=lease_held) and does nothing
//     more: the holder does this slot too;
//  2. for a scheduled fire, with a ledger that implements
//     ledger.ClearBeginner (redisledger on a single server or Sentinel), asks it to begin the
//     slot if nothing else is due (batched too), and when it did runs it
//     and goes to step 4. A ledger that joins the leases' backend
//     (ledger.LeaseJoiner: redisledger over the lease Client's own Redis
//     client, on Cluster too) does steps 1 and 2 in one script per batch,
//     which tries up to twice the free places (and 16 more) and takes at
//     most that many leases, so a replica that finds the leases held pays
//     a few commands per unit; the run's outcome and the release are then
//     one script too. Otherwise
//     reads the unit's State from the ledger (open slots, the last slot
//     seen, the horizon, the pause flag) and plans what is due, oldest
//     first: open slots whose retry time has come (failed with attempts
//     left, abandoned, requested), slots nobody began since the last one
//     the ledger saw (see Overlap and missed slots), and the fire itself.
//     Planning is one pure function, planClaim in plan.go: the one file
//     where a slot's fate is decided;
//  3. works through them one at a time: a run is Ledger.Begin (fenced) ->
//     the job function -> Ledger.Finish (fenced); a policy skip is
//     Ledger.Skip (fenced). A slot already succeeded, skipped, missed or
//     out of attempts is refused by Begin (ledger.ErrSlotDone) and not run, and a
//     failed slot is not begun before its stored retry time, however late
//     a replica's timer fires;
//  4. plans again and repeats until nothing is due, so that slots that came
//     due meanwhile are handled by the holder rather than lost to the
//     replicas that skipped; it schedules a wake-up at the earliest retry
//     time still to come;
//  5. releases the lease.
//
// When a run ends its claim on a ledger that joins the leases, step 5 and
// the run's outcome are one script, and on a ledger that marks claim
// groups (redisledger) that script waits for the replica's batch claims
// under way (the slots due at the same time),
// so that the claims, which decide when the runs start, are not queued
// behind outcomes at the server; the run's place in the pool is free from
// when its job function returned, and its unit stays claimed, its lease
// kept alive, until the outcome is recorded.
//
// The job function gets the lease's context: it ends when the lease is
// lost, Job.Timeout passes, or Stop's grace period ends (cause
// ErrInterrupted), and carries the lease's holder (fence.HolderFromContext):
// Run.Holder() is the same value, whose Scope (Run.Scope) is the lease
// name, "<job>|<partition>" for a partition. Sinks keep their fence per
// (resource, scope), so partitions of one job writing one resource never
// refuse each other's tokens.
//
// # Time
//
// Options.Clock (package clock; the real clock by default) is the only
// source of time: slot timers, lateness, retry times, heartbeats,
// Job.Timeout, and the now of every ledger call, so a store's own clock
// (PostgreSQL's now()) never enters a decision. Tests pass a *clock.Fake
// and step the wall clock, freeze time or skew replicas. The wall clock is
// not trusted to move evenly; the dispatcher sleeps at most 1 s and
// compares the wall clock's move with the elapsed time its timer measured:
//
//   - Stepped back (NTP, an operator): every unit's next fire is computed
//     again from the current reading, at once; a slot that already ran is
//     in the ledger and is not run again when the clock reaches it anew.
//     Logged clock_stepped.
//   - Moved forward by more than the sleep plus 500 ms (a jump, or the
//     process could not run: SIGSTOP, VM suspend, laptop sleep): the slots
//     that came due meanwhile were missed, as after a restart, and follow
//     Job.Missed; a unit whose fires all came due claims once, for the
//     latest. Logged clock_jumped.
//
// A slot planned later than the smaller of its schedule's interval and
// 5 s after its time, because a claim waited (a slow lease
// or ledger round trip, a full claim pool), was missed too.
//
// A ledger that lost its data (a Redis restart without persistence) is
// found by the replicas that saw it before: its horizon moved, or its last
// slot went back. Such a replica logs ledger_reset (counted by a
// Observer), and plans the slots after the last one it knew handled
// as missed, like any downtime; a claim that failed on a store error is
// retried and plans (reset.go, docs/guarantees.md).
//
// # Ledger and fencing
//
// The ledger keeps one record per slot (one logical run, many attempts):
//
//	pending -> running -> succeeded | failed | abandoned
//	failed | abandoned -> running            (the next attempt)
//	succeeded | failed | missed -> pending   (an operator's request)
//	skipped, missed                          (by policy)
//
// Each attempt records its number, owner, holder label (Options.Holder),
// token, start, heartbeat, finish, error and error class
// (ledger.Record.Attempts, Record.Latest). Views (package schedhttp, the
// holdfast CLI) and logs show the owner only as fence.OwnerID: with the
// token it is a write capability. Every fenced
// transition checks and raises a fence per (job, partition) with fence's
// acceptance rule: it is accepted only with a token above the highest one
// seen, or equal to it from the same owner; otherwise it returns a
// *fence.StaleTokenError (errors.Is fence.ErrStaleToken) and changes
// nothing. Finish and Heartbeat are also refused when the record no longer
// holds the caller's attempt. So once a newer holder has touched the
// unit's ledger, a holder that lost its lease (paused, partitioned, frozen
// past its TTL) can neither mark a slot done nor begin another one.
// Operator requests (Request, SetPaused) are not fenced. The storage is a
// seam of its own (package scheduler/ledger: the Ledger interface, its
// types and errors): redisledger runs every transition as one Lua script
// over keys that share one Cluster hash tag per unit, pgledger is a
// Postgres ledger, and ledgertest.Exercise checks any implementation.
//
// Each fence is named by the scope it fences, the name of the lease whose
// token it holds (ledger.Fence.Scope, Run.Scope): the unit's lease
// ("<job>" or "<job>|<partition>", ledger.UnitScope), or under
// OverlapAllow the slot's ("...@<unix>", ledger.SlotScope). Job names and
// partition keys may not hold '|', '@', '{' or '}', so no two units or
// slots share a lease name.
//
// # Heartbeat and abandoned attempts
//
// While an attempt runs, its holder records a heartbeat in the ledger every
// LeaseTTL/3 (ledger.Attempt.Heartbeat). A running attempt whose holder lost the
// lease (crashed, killed, stopped with a job that ignores its ctx, or
// frozen past the TTL) stays running in the ledger until the next holder
// of the unit claims: its Begin marks that attempt abandoned and starts the
// next one. The stale holder's late Finish is refused by the fence.
//
// # Overlap and missed slots
//
// Gap detection finds the slots after the last one the ledger saw that
// nobody began. The job's policies decide what happens to them:
//
//   - slots that came due while a run of the unit was in progress (the run
//     is longer than the interval, or a retry runs into the next slot) follow
//     Job.Overlap. OverlapForbid (default) records them skipped with reason
//     "overlap" and never runs them; OverlapBufferOne runs the latest of
//     them after the current run and skips the others; OverlapCancelOther
//     (Kubernetes' Replace) cancels the running attempt on whichever
//     replica runs it (a cancel request in the ledger, seen at the
//     holder's next heartbeat, every second at most; the run's ctx ends
//     with cause ErrInterrupted, the attempt is recorded failed and not
//     retried) and runs the new slot. It cancels only an attempt that the
//     new slot came due during: an attempt begun after it (a catch-up step
//     planned before it, a Retry or Backfill of an older slot) runs to its
//     end unless a later slot comes due during it. OverlapAllow runs every slot when
//     it comes due, so runs of one unit overlap: each slot runs under a
//     lease of its own ("<job>|<partition>@<unix>", "<job>@<unix>" for the
//     default partition) with its ledger writes
//     fenced by the slot's scope (ledger.SlotScope); the unit's lease is held only while
//     a replica plans (reads the ledger, applies the missed-slot policy,
//     begins the attempts), and the runs, outside the claim pool, start at
//     once;
//   - slots that came due while no replica could run them (all down, Redis
//     unreachable, the job paused, the replica frozen or its clock jumped,
//     a claim later than 5 s; see Time) follow Job.Missed, found
//     when a replica next claims. MissedCatchUp (default) runs them oldest first, at most
//     the MaxCatchUp (default 16) latest, and records the older ones
//     skipped, reason "missed"; MissedLatestOnly runs only the latest;
//     MissedSkip records them all skipped, reason "missed"; MissedManual
//     records them ledger.StatusMissed: they run only when an operator asks
//     (Retry, Backfill).
//
// The overlap policy applies to the slots of the schedule, not to the ones
// an operator asks for (Trigger, Retry, Backfill): an explicit request is
// never skipped as overlap, as Temporal's trigger and `kubectl create job
// --from=cronjob` are not subject to the schedule's concurrency policy.
// Asked for while a run of the unit is in progress, the slot waits for the
// unit's lease (its claim is tried again every second) and runs after that
// run; under OverlapAllow it runs at once under its own slot lease, and
// under OverlapCancelOther it does not cancel the run. A scheduled slot
// that comes due meanwhile follows Job.Overlap: under OverlapForbid, a
// trigger during a long run therefore runs after it while the next
// scheduled slot is recorded skipped, reason "overlap". Operators can ask
// only for slots the job has: Retry, Trigger and Backfill refuse times
// before StartAt or at or after EndAt with ErrInvalidArgument (Backfill
// clips its range to the window and refuses when nothing is left).
//
// Whatever the policy, missed slots and retries older than CatchUpWindow
// (default 1 h) or before StartAt are not run late (slots an operator
// requests are, and so are their retries: a retry whose time is within
// CatchUpWindow runs whatever its slot's age), and a job whose ledger shows no slot starts at its first
// claim: there is no backfill of the time before it existed. CatchUpWindow
// bounds MaxCatchUp: an hourly job with the default window catches up one
// slot at most. Gaps stay visible: the slots older than CatchUpWindow are
// recorded skipped, reason "missed: older than CatchUpWindow", the latest
// 1000 of them per claim (one Backfill can ask for all of them);
// older ones are left unrecorded and reported by a slots_unrecorded
// warning with their range and count.
//
// # Retries, backoff and timeout
//
// An attempt fails when the job function returns an error, panics
// (ClassPanic) or exceeds Job.Timeout (ClassTimeout; 0 means no timeout).
// classify is the one place that decides: Permanent(err) is ClassPermanent
// and never retried; a context ended by lease loss or shutdown is
// ClassInterrupted; anything else is ClassRetryable. Every class but
// permanent is retried until attempt MaxAttempts (default 3) has failed;
// the failure is then final. The wait before attempt n+1
// is RetryBackoff * 2^(n-1) (default 1 s), capped at RetryMaxBackoff
// (default 5 min), with ±20% jitter. The next attempt's time is stored in
// the ledger with the failure (ledger.Record.RetryAt): the replica that failed
// wakes at that time and claims again; if it dies in the wait, the next
// claim of the unit on any replica finds the stored time and runs the
// retry once it has come, so a crash during the backoff loses nothing. A
// retry is another attempt of the same logical run: same Slot, same
// idempotency key.
//
// A deferral is not a failure of the job: its error says "come back after
// d" (RetryAfter(err, d), or any error in its chain with a method
// RetryAfter() time.Duration, such as *httpfence.InFlightError when a
// downstream still holds the run's idempotency key because it crashed
// mid-request). classify records it ledger.ClassDeferred with the next
// attempt's time, now plus d (at most 15 min), stored in the
// ledger as a retry's is, and the ledger does not count it against
// MaxAttempts. Deferrals are bounded: after Job.MaxDeferrals (default 5)
// in a row, counted from the ledger's record, the next one counts as a
// retryable failure.
//
// # Operations
//
// Jobs lists the registered jobs with their next slot. Runs lists the
// records of a unit, newest first. Retry asks for a new attempt of one
// slot of the schedule (ErrInvalidArgument for a time that is not one), a
// succeeded, failed or missed one alike, as the next attempt of the same
// run, with the reason recorded ("retry: ..."); Trigger asks for an
// extra slot at the current second ("trigger: ..."), a run of its own with
// its own idempotency key (ErrTriggerTaken when that second is a fire of
// the schedule or already has a run); Backfill asks for
// every slot of a range, at most 1000 ("backfill: ..."). A
// requested slot runs once, at once on this replica when it is started,
// otherwise at the next claim of the unit on any replica: asked through a
// Scheduler that was never started (an admin process), it waits for the
// unit's next fire, retry or restart on a running replica (a year for a
// yearly job). Serve operations from the running replicas (schedhttp, as
// the holdfast command uses) to have them run at once. Pause stops
// every replica from running the job's slots until Resume; slots that came
// due while paused then follow the missed-slot policy. Operations on an
// unknown job or partition return ErrUnknownJob; a running slot cannot be
// requested (ledger.ErrSlotRunning). Package scheduler/schedhttp serves the
// same operations over HTTP behind a required authorizer.
//
// # Shutdown
//
// Stop stops claiming (a claim in progress begins no further slot), lets
// the running attempts finish until its ctx ends, then cancels their
// context (cause ErrInterrupted) and releases its lease, so another replica
// may take the slot over even from a job that ignores its ctx; an attempt
// that ends that way is recorded failed with ClassInterrupted and retried
// later. A job that ignores its ctx and returns nil after its lease was
// released is recorded succeeded if no replica took the slot over in the
// meantime (the ledger's fence still accepts its token); if one did, its
// record is refused as stale and the takeover's stands. Either way its
// effects are safe only at sinks that check its token. Leases are released by the scheduler itself on every path, never
// by a context ending. Stop then releases the remaining leases, waits
// for every goroutine the Scheduler started and returns nil, or ctx's
// error when the grace period ran out. Stop is safe to call twice and
// before Start. A Scheduler does not start again after Stop (ErrStarted).
// When the ctx given to Start ends, claiming stops but running attempts go
// on: only Stop cancels them.
//
// # Data loss and the horizon
//
// Redis without persistence can forget the ledger (a restart, a failover
// to an empty replica, FLUSHALL). Each unit's ledger keeps a horizon, the
// time its memory starts, set on first use: after a loss the first claim
// starts a new one. Gap detection never looks before the horizon, so the
// slots whose records were lost are not caught up again, even when an
// operator backfills an older slot afterwards. Use the Postgres ledger
// where the run history must survive.
//
// # Observability
//
// Options.Logger receives job_claimed, job_claim_skipped (reason lease_held,
// paused, done, ledger_error), job_run_finished, slot_skipped,
// slots_unrecorded, clock_stepped, clock_jumped, stale_token_rejected and
// job_window_ended (Register, an EndAt already past); Options.Observer receives measurements
// (scheduler/schedprom turns them into Prometheus collectors).
//
// A failed job's error becomes text in one place, where Options.Redact
// (default DefaultRedact) masks the secrets it recognizes (URL and MySQL
// DSN passwords, password=..., "token":"...", Bearer credentials, Cookie
// headers; not prose such as "invalid token: expired at ...") before the ledger
// stores the text and job_run_finished logs it; Record, Runs and JobStatus
// mask what they read again. The admin API, the console and the CLI show
// only that text.
//
// # Guarantees and non-guarantees
//
//   - A slot that succeeded is never run again by any replica, however late
//     its timer fires or however often the process restarts, as long as the
//     ledger keeps its record; only an operator's request runs it again.
//   - Each (slot, partition) has at most one successful attempt per
//     request, and only the current lease holder's transitions are
//     recorded.
//   - Replicas agree on slots, not on clocks: a replica runs a slot when its
//     own clock reaches it. Clock skew moves when a slot runs, not how many
//     times; a clock step moves when the next slots run, not whether.
//   - The job function of one slot can run more than once: a holder that
//     lost its lease may still be running when the next holder takes the
//     slot over, and a failed attempt is retried. Effects happen once only
//     where the sink checks the token (fence.Accept) or the idempotency key.
//     A job that ignores ctx can still try a late write after its lease is
//     gone; a fenced sink rejects it, an unfenced one does not.
//   - A slot can be skipped or left undone by design: by the overlap or
//     missed-slot policy, older than CatchUpWindow, beyond MaxCatchUp,
//     before the job's first run, or forgotten in a data loss. Retry
//     times are wall-clock instants: after a clock steps back by d, a
//     stored retry waits d longer.
//
// # Where things are
//
// The files, lowest first: each builds only on those before it (the
// order and the rule are in docs/architecture.md, section scheduler).
// job.go (Job, Run, the policies, the errors, Permanent, RetryAfter),
// observer.go (Observer), options.go (Options), schedule.go (window: the
// schedule within StartAt, EndAt and CatchUpWindow), plan.go (the pure
// planner: every slot's fate), state.go (the Scheduler's data: units, the
// timer queue's entries, a claim's hold), queue.go (queuing fires and
// wake-ups), attempt.go (one attempt's life: begin, run, heartbeat,
// timeout, outcome, retry time, record and release, wake), reset.go (the
// ledger memory that finds a reset), overlap.go (OverlapAllow's per-slot
// leases, OverlapCancelOther's replacement), admin.go (operations),
// claim.go (taking the lease, carrying a plan out), joined.go (claims in
// one call of a ledger that joins the leases), dispatch.go (the timer
// goroutine, clock steps, the claim pool), retention.go (pruning),
// scheduler.go (New, Register, Start, Stop). The Ledger contract is in
// package ledger, its stores below it, the HTTP handler in schedhttp.
package scheduler
