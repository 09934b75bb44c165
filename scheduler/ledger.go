package scheduler

import (
	"context"
	"errors"
	"time"

	"github.com/holdfast-go/holdfast/fence"
)

// Status is the state of a slot's run in the ledger.
//
//	pending -> running -> succeeded | failed | abandoned
//	failed | abandoned -> running (a later attempt)
//
// A running record whose token is below the current lease holder's is
// abandoned: its holder lost the lease. Begin takes it over as the next
// attempt.
type Status string

// Run states.
const (
	StatusRunning   Status = "running"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusAbandoned Status = "abandoned"
)

// ErrSlotDone is returned by Ledger.Begin when the slot needs no attempt:
// it succeeded, or failed its last attempt.
var ErrSlotDone = errors.New("scheduler: slot already done")

// Ledger records runs: one logical run per slot, many attempts. Every
// transition is fenced by the job lease's token with fence's acceptance
// rule, per (job, partition): a holder that lost its lease can never mark a
// slot after a newer holder touched the ledger; such calls return
// *fence.StaleTokenError.
type Ledger interface {
	// Outstanding returns the slots of (job, partition) at or after since
	// that have not succeeded and still have attempts left, oldest first,
	// and the latest slot ever begun (zero if none).
	Outstanding(ctx context.Context, job, partition string, since time.Time) (open []time.Time, last time.Time, err error)
	// Begin starts the next attempt of slot under token and owner and
	// returns its number (from 1). ErrSlotDone when the slot succeeded or
	// failed its maxAttempts-th attempt.
	Begin(ctx context.Context, slot Slot, token fence.Token, owner string, maxAttempts int) (attempt int, err error)
	// Finish records the end of attempt. With final, a failed slot gets no
	// further attempt.
	Finish(ctx context.Context, slot Slot, token fence.Token, owner string, attempt int, status Status, errText string, final bool) error
}

// Record is one slot's run as a ledger holds it.
type Record struct {
	Slot      Slot
	Status    Status
	Attempt   int
	Token     fence.Token
	Owner     string
	Started   time.Time
	Finished  time.Time
	LastError string
}
