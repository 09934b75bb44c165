package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler/cron"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// The Scheduler's data: the struct, one (job, partition) unit, the timer
// queue's entries, what starts a claim (claimReq) and a claim's hold on a
// lease. Below every file that acts on them (docs/architecture.md).

// ErrNotCreated is returned by the methods of a nil Scheduler, or of one
// not made by New (a zero Scheduler{}).
var ErrNotCreated = fmt.Errorf("scheduler: %w", errfamily.ErrNotCreated)

// Scheduler turns cron ticks into slots and runs each slot once, under the
// lease of its (job, partition), recording every attempt in the ledger.
// Create it with New, Register jobs, then Start; Stop drains it.
type Scheduler struct {
	cfg Options
	log *slog.Logger
	obs Observer

	clock  clock.Clock
	randMu sync.Mutex
	rand   *rand.Rand

	mu      sync.Mutex
	jobs    map[string]*registered
	units   map[unitKey]*unit
	order   []*unit
	started bool
	queue   entryHeap
	wake    chan struct{}
	woken   bool         // the queue changed since the dispatcher last read it
	parked  parkedAt     // the dispatcher's current sleep (zero: awake)
	active  atomic.Int64 // units with a claim running, OverlapAllow runs, the recovery at Start, heartbeats at work
	waiting atomic.Int64 // claims asleep on the clock (replaceHolder), which tests tell from work

	// beats are the timers of the running attempts' heartbeats (attempt.go),
	// for quiet: a heartbeat whose timer fired is at work until it counts
	// itself in active.
	beatMu     sync.Mutex
	beats      map[clock.Timer]struct{}
	trackBeats bool // the clock tells armed timers (clock.Fake): keep beats

	// resetCheckOff turns the finding of a ledger reset off (reset.go):
	// a test hook, for the negative control of the data-loss tests.
	resetCheckOff bool

	joiner  ledger.LeaseJoiner // the ledger, when it joins the leases' backend; else nil
	grouped bool               // the joiner marks claim groups (ledger.ClaimGroupMarker)

	sem         chan struct{}
	claims      *claimGate // the batch claims under way, which outcomes wait for (place.go)
	life        lifetime
	claimCancel context.CancelFunc // stops claiming
	runCancel   context.CancelFunc // cancels running jobs
	wg          sync.WaitGroup
	stopOnce    sync.Once
	stopped     chan struct{}
	tr          trace.Tracer // Options.TracerProvider's (trace.go)
}

// lifetime holds the two contexts of a started Scheduler (both
// context.Background before Start): claim ends when claiming stops (Stop,
// or Start's ctx ends); run ends when running attempts must stop (Stop's
// grace period ran out). Set once by Start, before any goroutine.
type lifetime struct {
	claim, run context.Context
}

// parkedAt is a sleep of the dispatcher: from at, for wait, on timer.
type parkedAt struct {
	at    time.Time
	wait  time.Duration
	timer clock.Timer
}

type unitKey struct{ job, partition string }

// unit is one (job, partition): one lease, one line of slots.
type unit struct {
	job       *registered
	partition string
	lease     string
	queued    *entry // the unit's next scheduled fire in the queue, guarded by Scheduler.mu
	// retryQueued: a retryClaim wake-up of the unit is in the queue,
	// guarded by Scheduler.mu.
	retryQueued bool

	// seen is the latest scheduled fire whose claim started (Start's
	// time before the first), guarded by Scheduler.mu: a slot at or before
	// it that nobody began when a claim starts was missed.
	seen instant
	mu   sync.Mutex
	// mem is what this replica saw of the unit's ledger (reset.go),
	// guarded by mu.
	mem   ledgerMemory
	busy  bool // a claim is running
	again bool // a fire or wake-up arrived while busy
	// pending is the latest scheduled fire that arrived while busy (its
	// At; the fire is rebuilt from the schedule when claimed).
	pending instant
	// pendingAfterError: a retry after an error arrived while busy; the
	// claim of pending carries claimReq.afterError.
	pendingAfterError bool
}

// ledgerMemory is what a replica saw of one unit's ledger, guarded by
// unit.mu.
type ledgerMemory struct {
	horizon  instant // the horizon the last State read showed (zero: none yet)
	recorded instant // the latest slot the ledger showed (State.Last) or this replica wrote
	sure     instant // recorded, or a scheduled fire whose claim found the lease held
	// failedFrom is the earliest slot whose claim failed on a store error
	// since the last complete plan (zero: none, or a wake-up failed).
	failedFrom instant
	// gapFrom, when not zero, is sure when a reset was found, not yet
	// carried out: plans read it as the ledger's last slot, and
	// gapHorizon (the horizon before the reset) as its horizon.
	gapFrom, gapHorizon instant
	// lostFrom, when not zero, is recorded when that reset was found, if
	// before gapFrom: the slots after it, up to gapFrom, this replica
	// never saw recorded, and their records, if any, are lost. Plans
	// record them skipped, reason reasonRecordLost (reset.go).
	lostFrom instant
	doubt    bool // a claim failed on a store error since the last complete plan
}

// instant is a wall-clock time in 8 bytes, where a time.Time takes 24:
// Unix nanoseconds, 0 for the zero time; years 1678 to 2262 (as
// time.Time.UnixNano). A unit keeps eight of them, so a registered job
// partition costs about 130 bytes less (bench: scheduler memory
// bytes_per_job_partition). Ordered as the times are.
type instant int64

// instantOf returns t as an instant (0 for the zero time).
func instantOf(t time.Time) instant {
	if t.IsZero() {
		return 0
	}
	return instant(t.UnixNano())
}

// time returns i as a time.Time in UTC (the zero time for 0).
func (i instant) time() time.Time {
	if i == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(i)).UTC()
}

// entry is a timer: a scheduled fire of a unit, or a wake-up.
type entry struct {
	at    time.Time
	u     *unit
	req   claimReq
	retry bool // a wake-up of retryClaim: u.retryQueued until popped
	index int
}

func (e *entry) scheduled() bool { return e.req.scheduled() }

type entryHeap []*entry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h entryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].index = i; h[j].index = j }
func (h *entryHeap) Push(x any)        { e := x.(*entry); e.index = len(*h); *h = append(*h, e) }

func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// hold is a claim's grip on one (job, partition): the unit, the lease it
// holds and that lease's fence, presented with every ledger write. The
// fence's scope is the lease's name: ledger.UnitScope of the unit, or
// under OverlapAllow ledger.SlotScope of the slot (the names the
// scheduler gives its leases).
type hold struct {
	u     *unit
	l     *lease.Lease
	fence ledger.Fence
	tctx  context.Context // l's context with the claim's span (trace.go); nil: l's context
	place *place          // the claim's place in the pool (nil: none to give back)
}

// newHold returns the hold of l on u. Its fence carries the replica's
// holder label (Options.Holder), which every Begin records with the
// attempt.
func (s *Scheduler) newHold(u *unit, l *lease.Lease) hold {
	return hold{u: u, l: l, fence: ledger.Fence{Scope: l.Name(), Token: l.Token(), Owner: l.Holder().Owner, Holder: s.cfg.Holder}}
}

// ctx ends when the lease is lost or released.
func (h hold) ctx() context.Context {
	if h.tctx != nil {
		return h.tctx
	}
	return h.l.Context()
}

func (h hold) slot(at time.Time) ledger.Slot {
	return ledger.Slot{Job: h.u.job.Name, At: at, Partition: h.u.partition}
}

// claimReq is what starts a claim: a scheduled fire of the unit (prev its
// schedule's fire before, zero if unknown) or a wake-up (fire.At zero: a
// retry falls due, an operator asked for a run).
type claimReq struct {
	fire cron.Fire
	prev time.Time
	// afterError marks the retry of a claim whose try failed with an
	// error (retryClaim): that try may have taken the lease on the server
	// all the same (see followUp).
	afterError bool
	// followUp marks a claim that looks again at a slot (followUp): it
	// reads the slot's record first, and claims only when there is none.
	followUp bool
	// recovery marks the claim each unit gets at Start: it reads the
	// ledger first, and claims only when there is something to do
	// (recoveryNeeded).
	recovery bool
	// held counts a wake-up's claims in a row that found the lease held
	// (heldRetry).
	held int
}

func (r claimReq) scheduled() bool { return !r.fire.At.IsZero() }

// slotAttr is the slot attribute of a log event: none for a claim that
// has no slot of its own (a wake-up, the recovery claim at Start), which
// slog handlers leave out.
func slotAttr(at time.Time) slog.Attr {
	if at.IsZero() {
		return slog.Attr{}
	}
	return slog.Time("slot", at)
}

// leaseCtx is the context the scheduler's leases are taken with. It never
// ends: a lease lives until its claim releases it (every claim does, on
// every path) or it is lost; shutdown ends runs through their own context
// (ErrInterrupted), not by ending leases.
func (s *Scheduler) leaseCtx() context.Context { return context.WithoutCancel(s.life.run) }

// ready refuses a Scheduler not made by New (nil or zero), and a nil ctx.
func (s *Scheduler) ready(ctx context.Context) error {
	if s == nil || s.cfg.Ledger == nil {
		return ErrNotCreated
	}
	if ctx == nil {
		return fmt.Errorf("%w: %w", ErrInvalidArgument, errfamily.ErrNilContext)
	}
	return nil
}
