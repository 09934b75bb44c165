package scheduler

import (
	"time"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// Observer receives measurements from a Scheduler; package
// scheduler/schedprom turns them into Prometheus collectors. Methods are
// called synchronously and must not block. job is a registered job name (a
// bounded set); slots, owners and partitions are never passed.
type Observer interface {
	// RunStarted is called when an attempt begins, any attempt (retries,
	// and runs an operator asked for, included); lag is how late it
	// started after its slot's instant. For the lag of the schedule
	// alone, implement ScheduleLagObserver too.
	RunStarted(job string, lag time.Duration)
	// RunCompleted is called when an attempt ends, with its status
	// (succeeded or failed) and duration.
	RunCompleted(job string, status ledger.Status, took time.Duration, finished time.Time)
	// ClaimConflict is called when a claim found the job's lease held.
	ClaimConflict(job string)
	// StaleRejected is called when the ledger refused this replica's
	// token: it had lost the lease.
	StaleRejected(job string)
	// SlotSkipped is called for a slot recorded skipped or missed.
	SlotSkipped(job string, status ledger.Status)
	// RunFailed is called, after RunCompleted, for an attempt recorded
	// failed: class is its error class (ClassInterrupted: the lease was
	// lost or the scheduler shut down mid-run, so the attempt was
	// abandoned); final reports that no attempt follows (the class is not
	// retried, or the attempt budget is spent).
	RunFailed(job string, class ledger.ErrorClass, final bool)
	// LedgerError is called when a store failed a claim: a ledger call
	// or a lease acquisition returned an error of its own (Redis or
	// Postgres down, a timeout), not a refusal (a stale token, a done
	// slot, a held lease) nor the end of a context. op names the call:
	// "state", "begin", "heartbeat", "finish", "skip" (the ledger.Ledger
	// method) or "claim" (the job's or slot's lease), a fixed set fit for
	// a metric label. The same event is logged at Warn or Error.
	LedgerError(job, op string)
	// LedgerReset is called once per reset of the ledger a replica finds
	// for one (job, partition) (the event ledger_reset; see
	// docs/guarantees.md): scheduler/schedprom counts it in
	// job_ledger_reset_total{job}.
	LedgerReset(job string)
}

// ScheduleLagObserver is an optional Observer interface: ScheduleLag is
// called, after RunStarted, for the first attempt of a slot that came due
// on the job's schedule (catch-up after downtime included), with how late
// it started after the slot's instant. It is not called for runs an
// operator asked for (Trigger, Backfill, Retry: their slots may be years
// old) nor for later attempts (they wait for their backoff), so that a
// percentile of lag measures the scheduler, not the operators.
// scheduler/schedprom implements it (job_schedule_lag_seconds).
type ScheduleLagObserver interface {
	ScheduleLag(job string, lag time.Duration)
}

// The op values of Observer.LedgerError.
const (
	opState     = "state"
	opBegin     = "begin"
	opHeartbeat = "heartbeat"
	opFinish    = "finish"
	opSkip      = "skip"
	opClaim     = "claim"
)

type nopObserver struct{}

func (nopObserver) RunStarted(string, time.Duration)                             {}
func (nopObserver) RunCompleted(string, ledger.Status, time.Duration, time.Time) {}
func (nopObserver) ClaimConflict(string)                                         {}
func (nopObserver) StaleRejected(string)                                         {}
func (nopObserver) SlotSkipped(string, ledger.Status)                            {}
func (nopObserver) RunFailed(string, ledger.ErrorClass, bool)                    {}
func (nopObserver) LedgerError(string, string)                                   {}
func (nopObserver) LedgerReset(string)                                           {}
