// Package scheduler runs cron jobs across replicas so that each scheduled
// slot runs once, under a fenced lease, with every attempt recorded in a
// ledger.
//
// # Overview
//
// Every replica of a service creates a Scheduler over the same Redis,
// registers the same jobs and calls Start. At each fire time of a job every
// replica tries to take the job's lease; the one that gets it runs the due
// slots and the others skip. The lease gives liveness (one replica usually
// does the work); safety comes from the fencing token that comes with the
// lease: the ledger refuses a transition from a holder whose token has been
// superseded, and so must every sink the job writes to (package fence).
//
//	leases, _ := lease.New(rdb, lease.Options{})
//	ledger, _ := scheduler.NewRedisLedger(rdb, "")
//	s, _ := scheduler.New(scheduler.Config{Leases: leases, Ledger: ledger})
//	_ = s.Register(scheduler.Job{Name: "daily-settlement", Spec: "0 2 * * *",
//		Zone: "Europe/Paris", Run: settle})
//	_ = s.Start(ctx)
//	defer s.Stop(shutdownCtx)
//
// # Slot identity
//
// A Slot is (job name, scheduled instant in UTC at second precision,
// partition; the partition is "" for now). It is computed from the schedule
// (package cron, including its DST rules), never from the clock of the
// replica whose timer fired: replicas whose timers fire seconds apart, or a
// replica restarted after the slot, claim the same Slot. Run also carries the
// slot's local time, zone and business date (the local date), and
// Slot.Key, "job:2006-01-02T15:04:05Z:partition", as the idempotency key to
// give to sinks.
//
// # Claim procedure
//
// Each job has one lease, named after the job (Job.LeaseTTL, kept alive while
// held). At each fire time a replica:
//
//  1. calls lease.Client.TryAcquire once, without waiting. A replica that
//     does not get the lease logs job_claim_skipped (reason=lease_held) and
//     does nothing more: the holder runs this slot too;
//  2. asks the ledger for the job's outstanding work (Ledger.Outstanding:
//     the unfinished slots in the catch-up window and the last slot ever
//     begun) and computes the due slots (see Catch-up);
//  3. runs the due slots one at a time, oldest first, each as Ledger.Begin
//     (fenced by the lease token) -> the job function -> Ledger.Finish
//     (fenced). A slot already succeeded, or out of attempts, is refused by
//     Begin (ErrSlotDone) and not run;
//  4. asks the ledger again and repeats until nothing is due, so that slots
//     that came due meanwhile are run by the holder rather than lost to the
//     replicas that skipped;
//  5. releases the lease. The replica's timer resumes with the first slot
//     after its last look at the ledger.
//
// The job function gets the lease's context: it ends when the lease is lost
// or when Stop's grace period ends, and carries the token and owner
// (fence.FromContext). Run.Token and Run.Owner are the same values.
//
// # Ledger and fencing
//
// The ledger keeps one record per slot (one logical run, many attempts):
//
//	(none) --Begin--> running --Finish--> succeeded | failed
//	failed  --Begin at a later claim--> running (next attempt)
//	running --Begin by a newer holder--> running (next attempt)
//
// Each record holds the attempt number, its owner and token, start and
// finish times and the last error. Every Begin and Finish checks and raises
// a fence per (job, partition) with fence's acceptance rule: it is accepted
// only with a token above the highest one seen, or equal to it from the same
// owner; otherwise it returns a *fence.StaleTokenError (errors.Is
// fence.ErrStaleToken) and changes nothing. Finish is also refused when the
// record no longer holds the caller's attempt. So once a newer holder has
// touched the job's ledger, a holder that lost its lease (paused, partitioned,
// frozen past its TTL) can neither mark a slot done nor begin another one. A
// running record whose holder lost the lease is abandoned: the next holder's
// Begin takes it over as the next attempt. Every transition is one Lua script
// (scripts/*.lua); a RedisLedger keeps the records of a (job, partition)
// under one Cluster hash tag.
//
// # Catch-up and gap detection
//
// The due slots of a claim are, among the job's slots in [StartAt, EndAt)
// that are not in the future:
//
//   - the unfinished slots the ledger holds (failed with attempts left, or
//     abandoned) that are within CatchUpWindow of now;
//   - the slots after the last begun one that nobody began (missed during
//     downtime, or while every replica was busy), at most CatchUpWindow old;
//   - the slot being claimed.
//
// Of these only the MaxCatchUp+1 most recent are run; older ones are skipped
// for good. A job whose ledger shows no begun slot starts at the slot of its
// first claim: there is no backfill of the time before it first ran. Slots
// skipped by these bounds, and slots older than the window, are left to
// manual action.
//
// # Retries
//
// An attempt fails when the job function returns an error or panics. A
// failed slot is retried at a later claim of the job (its next fire time, on
// whichever replica wins the lease), never twice within one claim, until it
// has had MaxAttempts attempts; it is then left failed and no longer
// outstanding. Retries happen only within CatchUpWindow.
//
// # Shutdown
//
// Stop stops claiming (a claim in progress begins no further slot), lets the
// running attempts finish until its ctx ends, then cancels their context;
// an attempt that ends that way is recorded failed, with its error prefixed
// "interrupted: ", and is retried at a later claim. Stop then releases the
// leases, waits for every goroutine the Scheduler started and returns nil,
// or ctx's error when the grace period ran out. Stop is safe to call twice
// and before Start. A Scheduler does not start again after Stop
// (ErrStarted). When the ctx given to Start ends, claiming stops but running
// attempts go on: only Stop cancels them.
//
// # Guarantees and non-guarantees
//
//   - A slot that succeeded is never run again by any replica, however late
//     its timer fires or however often the process restarts, as long as the
//     ledger keeps its record.
//   - Each slot has at most one successful attempt in the ledger, and only
//     the current lease holder's transitions are recorded.
//   - Replicas agree on slots, not on clocks: a replica runs a slot when its
//     own clock reaches it. Clock skew moves when a slot runs, not how many
//     times.
//   - The job function of one slot can run more than once: a holder that
//     lost its lease may still be running when the next holder takes the
//     slot over, and a failed attempt is retried. Effects happen once only
//     where the sink checks the token (fence.Accept) or the idempotency key.
//     A job that ignores ctx can still try a late write after its lease is
//     gone; a fenced sink rejects it, an unfenced one does not.
//   - A slot can be skipped: older than CatchUpWindow, beyond MaxCatchUp, or
//     before the job's first run.
package scheduler
