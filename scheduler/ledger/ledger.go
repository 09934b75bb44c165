package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/errfamily"
)

// Slot identifies one scheduled execution: the job, the scheduled instant
// in UTC (second precision) and the partition. Every replica computes the
// same Slot from the schedule, whenever its own timer fires.
type Slot struct {
	Job       string
	At        time.Time
	Partition string
}

// Key is the slot's name, "job:2006-01-02T15:04:05Z:partition" (the
// ledgers' identity of the slot, and the idempotency key while it is at
// most MaxIdempotencyKeyLen bytes: see IdempotencyKey):
// the same for every attempt of the slot, on every replica. It is
// printable ASCII (0x20-0x7E), so it is an HTTP Idempotency-Key (an RFC
// 8941 sf-string) as it is, and injective: no two slots share a key.
// Bytes of the job name and partition outside printable ASCII are
// percent-encoded ("%C3%BC" for 'ü', upper-case hex, one escape per byte of
// UTF-8), and so are '%' itself and, in the job name only, ':'. Names of
// printable ASCII without '%' (jobs also without ':') keep the key they
// had before the encoding.
func (s Slot) Key() string {
	return escapeKey(s.Job, true) + ":" + s.At.UTC().Format(time.RFC3339) + ":" + escapeKey(s.Partition, false)
}

// escapeKey percent-encodes the bytes of v that Key does not carry as
// they are: outside 0x20-0x7E, '%', and ':' when colon is set (the job
// name, whose end the first ':' marks).
func escapeKey(v string, colon bool) string {
	const hex = "0123456789ABCDEF"
	var b []byte
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c >= 0x20 && c <= 0x7e && c != '%' && (c != ':' || !colon) {
			if b != nil {
				b = append(b, c)
			}
			continue
		}
		if b == nil {
			b = append(make([]byte, 0, len(v)+8), v[:i]...)
		}
		b = append(b, '%', hex[c>>4], hex[c&0xf])
	}
	if b == nil {
		return v
	}
	return string(b)
}

// Status is the state of a slot's run in the ledger.
//
//	pending -> running -> succeeded | failed | abandoned
//	failed | abandoned -> running            (a later attempt)
//	succeeded | failed | missed -> pending   (an operator's Request)
//	skipped, missed                          (by policy; missed awaits a Request)
//
// A running attempt whose holder lost the job lease is abandoned: the next
// holder's Begin marks it so and starts the next attempt.
type Status string

// Run states.
const (
	StatusPending   Status = "pending"
	StatusRunning   Status = "running"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusAbandoned Status = "abandoned"
	StatusSkipped   Status = "skipped"
	StatusMissed    Status = "missed"
)

// ErrorClass classifies a failed attempt. A bounded set: safe as a label.
type ErrorClass string

// Error classes.
const (
	ClassNone        ErrorClass = ""
	ClassRetryable   ErrorClass = "retryable"
	ClassPermanent   ErrorClass = "permanent"   // Permanent(err): no further attempt
	ClassInterrupted ErrorClass = "interrupted" // shutdown or lease loss
	ClassTimeout     ErrorClass = "timeout"     // Job.Timeout passed
	ClassPanic       ErrorClass = "panic"
	// ClassDeferred: not the job's failure, the job was told to come back
	// later (scheduler.RetryAfter; an in-flight answer of a downstream).
	// A failed Outcome of this class with RetryAt set does not use up the
	// attempt budget (see Ledger.Finish).
	ClassDeferred ErrorClass = "deferred"
)

// Errors returned by ledgers, besides *fence.StaleTokenError (matching
// fence.ErrStaleToken, its Scope the refused Fence's), ErrUnknownScope and
// ErrInvalidFence.
var (
	// ErrSlotDone is returned by Ledger.Begin when the slot needs no
	// attempt: it succeeded, was skipped, failed its last attempt, or
	// awaits an operator (missed).
	ErrSlotDone = errors.New("ledger: slot already done")
	// ErrSlotRunning is returned by Ledger.Request for a slot that is
	// running: retry it after it ends.
	ErrSlotRunning = errors.New("ledger: slot is running")
	// ErrCancelRequested is returned by Heartbeat (after recording it)
	// when a Canceler's RequestCancel named a later slot.
	ErrCancelRequested = errors.New("ledger: cancel of the running attempt requested")
	// ErrNilContext is returned, wrapped, by every method of redisledger's,
	// pgledger's and ledgertest.Memory's ledgers called with a nil
	// context, before the store is touched.
	ErrNilContext = fmt.Errorf("ledger: %w", errfamily.ErrNilContext)
)

// PruneMargin is how far behind the store's clock a prune cutoff must be
// (1 hour; fence.PruneMargin, which sinks' PruneSlotScopes use too):
// Pruner.Prune and PrunePreviewer.PrunePreview refuse a before later than
// the store's now minus PruneMargin with a *PruneCutoffError (matching
// ErrPruneCutoff), deleting and raising nothing. A cutoff is a watermark
// that never goes down: slots before it without a record are closed for
// good under OverlapAllow, so a cutoff that reaches slots that may still
// begin stops the job. The hour covers what may still begin a slot after
// its instant: a late timer, a replica waiting out a crashed holder's
// lease (Job.LeaseTTL, 30 s by default), the skew between the caller's
// clock and the store's, all far below an hour when the system is
// healthy. It is no retention to aim at: keep what operators read
// (docs/operations.md, "Retention and growth").
const PruneMargin = fence.PruneMargin

// ErrPruneCutoff is matched (errors.Is) by every *PruneCutoffError. It is
// fence.ErrPruneCutoff, which a sink's refused PruneSlotScopes matches too.
var ErrPruneCutoff = fence.ErrPruneCutoff

// PruneCutoffError is the error of a Prune or PrunePreview whose cutoff
// Before is later than Limit, the store's clock Now minus PruneMargin
// (Margin; ledgertest.Memory: its own, SetPruneMargin). It matches
// ErrPruneCutoff. It is fence.PruneCutoffError, the error of a refused
// PruneSlotScopes too.
type PruneCutoffError = fence.PruneCutoffError

// CheckPruneCutoff returns a *PruneCutoffError if before is later than now
// minus PruneMargin, nil otherwise (fence.CheckPruneCutoff). Ledgers call
// it with their store's clock (Redis TIME, Postgres now()) before a Prune
// or PrunePreview.
func CheckPruneCutoff(before, now time.Time) error {
	return fence.CheckPruneCutoff(before, now)
}

// CheckPruneCutoffMargin is CheckPruneCutoff with a margin of the
// caller's (fence.CheckPruneCutoffMargin): ledgertest.Memory's, which a
// simulation shortens (SetPruneMargin). A store that real schedulers
// share uses PruneMargin.
func CheckPruneCutoffMargin(before, now time.Time, margin time.Duration) error {
	return fence.CheckPruneCutoffMargin(before, now, margin)
}

// Pruner is an optional Ledger interface: retention. Prune deletes the
// records (and their attempts) of slots before before that are done
// (succeeded, failed with no attempt left, skipped, missed) and returns how
// many slot records it deleted. It never deletes a running, pending or
// retryable slot, the (job, partition)'s fence, a pause flag, its horizon or
// its latest begun slot (State.Last), so gap detection and catch-up read
// the same State after a Prune as before. redisledger and pgledger
// implement it; ledgertest.Exercise checks it on every ledger that does.
//
// The fence of a slot's own scope (SlotScope, OverlapAllow's) goes with
// the slot's record, so slot fences do not pile up one per slot. That
// reopens no window for a stale holder of the pruned slot: every slot
// before the pair's prune cutoff (State.Pruned) whose own fence is gone
// is closed, and a transition under its slot scope is refused with a
// *fence.StaleTokenError (Current 0) whatever its token. A Request
// (Backfill, Retry) of such a slot may record it pending again, but no
// attempt of it can begin: under OverlapAllow, backfill only what is
// newer than the retention.
//
// Prune refuses a cutoff later than the store's clock minus PruneMargin
// with a *PruneCutoffError (ErrPruneCutoff) and changes nothing
// (CheckPruneCutoff).
type Pruner interface {
	Prune(ctx context.Context, before time.Time) (deleted int64, err error)
}

// PrunePreviewer is an optional Ledger interface, beside Pruner: a dry
// run. PrunePreview lists the slots Prune(ctx, before) would delete now,
// changing nothing: at most limit of them (limit > 0), and how many there
// are in all. It refuses a cutoff as Prune does (ErrPruneCutoff).
// redisledger, pgledger and ledgertest.Memory implement it;
// ledgertest.Exercise checks that it lists what Prune then deletes.
type PrunePreviewer interface {
	PrunePreview(ctx context.Context, before time.Time, limit int) (slots []Slot, total int64, err error)
}

// PauseReader is an optional Ledger interface for operators: Paused
// reports job's pause flag (SetPaused) and writes nothing, where State
// would start a pair's horizon. The scheduler's JobStatus uses it, and
// falls back to State of the job's first partition on a ledger without
// it. redisledger, pgledger and ledgertest.Memory implement it;
// ledgertest.Exercise checks it on every ledger that does.
type PauseReader interface {
	Paused(ctx context.Context, job string) (bool, error)
}

// StatesReader is an optional Ledger interface that reads the State of
// many (job, partition)s in one call: the scheduler's recovery at Start
// reads every unit before it takes any lease, in batches of
// StatesBatch. States returns one State per request, in order, each as
// Ledger.State would return it for the request at now (a pair's first
// read starts its horizon at now), or an error for the whole batch.
// redisledger (one pipeline: one round trip on a single server) and
// pgledger (one statement) implement it; ledgertest.Exercise checks it
// on every ledger that does. A wrapper that embeds one of them and
// changes State must change States too: the scheduler calls States, the
// embedded one, at Start.
type StatesReader interface {
	States(ctx context.Context, reqs []StateRequest, now time.Time) ([]State, error)
}

// StatesBatch is the most requests the scheduler passes to one
// StatesReader.States call (256).
const StatesBatch = 256

// StateRequest is one (job, partition) for StatesReader.States, with
// State's since: open slots before it are left out.
type StateRequest struct {
	Job, Partition string
	Since          time.Time
}

// Canceler is an optional Ledger interface, needed by OverlapCancelOther:
// RequestCancel asks the running attempt of (job, partition) to stop
// because slot replaces it; the holder learns it from Heartbeat, which
// returns ErrCancelRequested for an attempt of a slot earlier than the
// latest one asked for (never for slot itself: a replica that lost the
// race for the same slot cancels nothing). Not fenced: the caller does not
// hold the lease. Part of the contract for every ledger that implements it:
// ledgertest.Exercise checks it (redisledger and ledgertest.Memory
// implement it; pgledger does not, so OverlapCancelOther is refused over
// it).
type Canceler interface {
	RequestCancel(ctx context.Context, job, partition string, slot time.Time) error
}

// ClearBeginner is an optional Ledger interface that saves the scheduler a
// round trip per slot in the common case, and batches slots due together.
// BeginIfClear answers each request (one result per request, in order): it
// begins the request's slot as Begin does when nothing else is due for its
// (job, partition): the job is not paused, no open slot at or after Since
// nor any pending slot exists but the slot itself, no other slot runs
// (State lists a running slot whatever its age: its holder lost the lease,
// and the plan takes it over), the slot is not waiting
// for its retry time, the latest slot begun or skipped (State.Last) is
// zero or not before Prev, the schedule's fire before the slot (so no slot
// between them went unseen), and it is not before Seen, the latest slot
// the caller knows the ledger recorded: a ledger whose last slot is gone
// or went back lost data (a Redis restart without persistence), which the
// caller finds only by reading State and comparing it with what it saw
// (scheduler/reset.go). Then Clear is true and the other fields are
// Begin's results (Err: ErrSlotDone, *fence.StaleTokenError, a store
// error). Otherwise it begins nothing and returns Clear == false: the
// caller reads State and plans. A ledger may always answer Clear == false.
// ledgertest.Exercise checks it on every ledger that implements it
// (redisledger does). The scheduler asks only for the unit scope.
type ClearBeginner interface {
	BeginIfClear(ctx context.Context, reqs []BeginRequest, now time.Time) []BeginResult
}

// BeginRequest is one slot for ClearBeginner.BeginIfClear.
type BeginRequest struct {
	Slot        Slot
	Fence       Fence
	MaxAttempts int
	// Prev is the schedule's fire before Slot.At (time.Unix(0, 0) when the
	// job has none); open slots before Since are not due.
	Prev, Since time.Time
	// Seen is the latest slot of the pair the caller knows the ledger
	// recorded (zero: none): a State.Last missing or before it is not
	// clear.
	Seen time.Time
}

// BeginResult answers a BeginRequest.
type BeginResult struct {
	Attempt, Left int
	Clear         bool
	Err           error
}

// Fence is what a lease holder presents with every fenced transition:
// the holder of a lease (Scope, Token, Owner, as fence.Holder) and, for a
// Begin under OverlapAllow, the planner's.
//
// A ledger keeps one fence per scope of a slot, as a sink keeps one per
// (resource, scope), because a token is only comparable with tokens of
// the same lease. A slot has two: its (job, partition)'s, named
// UnitScope(job, partition), shared by all of the pair's slots so that a
// holder that lost the unit lease can write to none of them once a newer
// holder wrote to any; and its own, named SlotScope(slot), for runs under
// OverlapAllow, each under a lease of its own. The transition checks and
// raises the fence Scope names and leaves the other as it is. A scope
// that is neither is refused (ErrUnknownScope).
type Fence struct {
	// Scope is the name of the lease Token was issued for: UnitScope or
	// SlotScope of the slot written (scheduler.Run.Scope).
	Scope string
	// Token is that lease's fencing token; Owner the acquisition's owner.
	Token fence.Token
	Owner string
	// Holder is the holder label (the replica's name, scheduler
	// Options.Holder) a Begin records with the attempt it starts
	// (Attempt.Holder); "" for none. Only Begin, BeginIfClear and
	// ClaimAll read it; it takes no part in the fence.
	Holder string
	// Planner, on a slot-scoped Begin (OverlapAllow's planner), is the
	// holder of the unit lease under which the slot is begun, with the
	// unit scope: Begin also checks and raises the unit's fence with it,
	// before the slot's, so that a planner that lost the unit lease can no
	// longer Skip a slot once a newer planner began any. The scheduler
	// sets it on Begin only: a run outlives its planner's lease. Nil
	// elsewhere; see Check.
	Planner *Fence
}

// Outcome is how an attempt ended, for Ledger.Finish.
type Outcome struct {
	// Status is StatusSucceeded or StatusFailed.
	Status Status
	// Error and Class describe a failure.
	Error string
	Class ErrorClass
	// RetryAt, for a failure with attempts left, is the earliest time of
	// the next attempt; zero makes the failure final.
	RetryAt time.Time
}

// OpenSlot is a slot that still needs an attempt.
type OpenSlot struct {
	At time.Time
	// RetryAt is the earliest time of its next attempt (zero: now).
	RetryAt time.Time
}

// State is what a ledger knows of one (job, partition) for a claim.
type State struct {
	// Open lists the slots that need an attempt, oldest first: running
	// ones whatever their time (a running slot older than the window
	// was left by a holder that crashed, and is taken over however old:
	// left out, it stayed running for good, where no Request could reach
	// it), failed ones with attempts left
	// whose slot or retry time is at or after it (a retry that comes due
	// within the window is run, whatever the slot's age: the retries of a
	// slot an operator asked for, Request, run as its first attempt did),
	// and pending ones (asked for by an operator) whatever their time. A lease
	// holder calls State only between its own attempts, so a running slot
	// it sees belongs to a holder that lost the lease: it is abandoned,
	// and the next Begin takes it over.
	Open []OpenSlot
	// Last is the latest slot ever begun, skipped or missed (zero if none).
	Last time.Time
	// Horizon is when this ledger's memory starts: no slot before it is
	// ever caught up. A store that lost its data (a Redis restart without
	// persistence) starts a new horizon, so succeeded slots it forgot are
	// not run again.
	Horizon time.Time
	// Paused reports that the job is paused (SetPaused).
	Paused bool
	// Pruned is the latest cutoff Prune used on the pair (zero: never):
	// the records of done slots before it may be gone, so a plan that
	// looks behind Last (a found reset's gap) leaves those slots alone:
	// they were recorded once (see scheduler/reset.go).
	Pruned time.Time
}

// Attempt is one attempt of a slot as the ledger records it.
type Attempt struct {
	N     int
	Token fence.Token
	// Owner is the attempt's lease owner, a write capability: views show
	// fence.OwnerID(Owner), never Owner.
	Owner string
	// Holder is the holder label of the replica that began the attempt
	// (Fence.Holder), "" when it gave none.
	Holder    string
	Status    Status
	Class     ErrorClass
	Error     string
	Started   time.Time
	Heartbeat time.Time
	Finished  time.Time
}

// Record is one slot's logical run as a ledger holds it.
type Record struct {
	Slot     Slot
	Status   Status
	Attempt  int // latest attempt number, 0 before the first
	RetryAt  time.Time
	Reason   string // why the slot was skipped, missed or requested
	Attempts []Attempt
}

// Ledger records runs: one logical run per slot, many attempts. Every
// transition a lease holder makes (Begin, Heartbeat, Finish, Skip) is
// fenced with the acceptance rule on the fence of the Fence's scope (see
// Fence): a holder that lost its lease can never write after a newer
// holder of the same lease touched the ledger; such calls return
// *fence.StaleTokenError and change nothing. Operator actions (Request,
// SetPaused) are not fenced. Every method called with a nil context
// returns an error matching ErrNilContext and touches nothing. Run every
// implementation through ledgertest.Exercise (package
// scheduler/ledger/ledgertest), which checks both.
type Ledger interface {
	// State returns what a claim needs: open slots at or after since,
	// the last begun slot, the horizon and the pause flag. A pair's first
	// call (or first since the store lost its data) starts its horizon at
	// now: the scheduler's clock, never the store's, decides.
	State(ctx context.Context, job, partition string, since, now time.Time) (State, error)
	// Begin starts the next attempt of slot and returns its number (from
	// 1, over the slot's whole life) and left, how many more attempts
	// the budget allows after this one: maxAttempts minus the attempts
	// made since the slot was created or last Requested (an operator's
	// Request starts a fresh budget). A running attempt of another owner
	// is marked abandoned first. ErrSlotDone when the slot needs no
	// attempt, or when the budget is spent.
	Begin(ctx context.Context, slot Slot, f Fence, maxAttempts int, now time.Time) (attempt, left int, err error)
	// Heartbeat records that attempt is alive.
	Heartbeat(ctx context.Context, slot Slot, f Fence, attempt int, now time.Time) error
	// Finish records how attempt ended. A failure of class ClassDeferred
	// with RetryAt set is recorded like any other, but does not count
	// against the budget: the next Begin's left is what this attempt's
	// was (the ledger moves the budget's base on by one).
	Finish(ctx context.Context, slot Slot, f Fence, attempt int, o Outcome, now time.Time) error
	// Skip records a slot that policy does not run: StatusSkipped
	// (overlap, missed-slot skip, latest-only) or StatusMissed (manual:
	// awaits a Request). A slot that was begun is left as it is.
	Skip(ctx context.Context, slot Slot, f Fence, status Status, reason string, now time.Time) error
	// Request asks for a new attempt of slot (operator retry, trigger or
	// backfill), whatever its state but running: it becomes pending with
	// a fresh attempt budget, and reason is recorded. ErrSlotRunning for
	// a running slot.
	Request(ctx context.Context, slot Slot, reason string, now time.Time) error
	// SetPaused pauses or resumes every partition of job.
	SetPaused(ctx context.Context, job string, paused bool) error
	// Get returns slot's record; found is false when there is none.
	Get(ctx context.Context, slot Slot) (rec Record, found bool, err error)
	// List returns the records of (job, partition) with from <= slot < to,
	// newest first, at most limit.
	List(ctx context.Context, job, partition string, from, to time.Time, limit int) ([]Record, error)
}

// Latest returns the record's latest attempt; ok is false before the
// first.
func (r Record) Latest() (a Attempt, ok bool) {
	if len(r.Attempts) == 0 {
		return Attempt{}, false
	}
	return r.Attempts[len(r.Attempts)-1], true
}
