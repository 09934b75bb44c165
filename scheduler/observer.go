package scheduler

import (
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"time"
)

// Observer receives measurements from a Scheduler; package
// scheduler/schedprom turns them into Prometheus collectors. Methods are
// called synchronously and must not block. job is a registered job name (a
// bounded set); slots, owners and partitions are never passed.
type Observer interface {
	// RunStarted is called when an attempt begins; lag is how late it
	// started after its slot's scheduled instant.
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
}

type nopObserver struct{}

func (nopObserver) RunStarted(string, time.Duration)                             {}
func (nopObserver) RunCompleted(string, ledger.Status, time.Duration, time.Time) {}
func (nopObserver) ClaimConflict(string)                                         {}
func (nopObserver) StaleRejected(string)                                         {}
func (nopObserver) SlotSkipped(string, ledger.Status)                            {}
