package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/ownerarg"
	"github.com/holdfast-go/holdfast/internal/safe"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/scheduler/cron"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// Defaults of the Job fields, and the limits of a deferral. Each field's
// doc comment states its default; these are not part of the API.
const (
	defaultLeaseTTL        = 30 * time.Second
	defaultMaxAttempts     = 3
	defaultRetryBackoff    = time.Second
	defaultRetryMaxBackoff = 5 * time.Minute
	defaultCatchUpWindow   = time.Hour
	defaultMaxCatchUp      = 16
	defaultMaxDeferrals    = 5
	// maxDeferral is the longest wait a deferral is honoured for (15 min):
	// a longer RetryAfter is cut to it. It is not RetryMaxBackoff, which
	// is sized for the job's own failures: a downstream's Retry-After is
	// its lock's remaining time, up to its LockTTL (1 min by default).
	maxDeferral = 15 * time.Minute
)

// Errors for bad input, returned before anything runs.
var (
	// ErrInvalidJob matches every rejected Job: empty, blank or oversized
	// name, a name holding '{', '}', '|' or '@', a control or format
	// character (Unicode Cc, Cf) or invalid UTF-8, a nil Run, bad partitions,
	// negative durations, a LeaseTTL below leasedriver.MinTTL, EndAt before
	// StartAt, RetryBackoff above RetryMaxBackoff, or an unsupported
	// policy, or a name already registered. Spec and zone errors wrap
	// cron's errors
	// (cron.ErrInvalidSpec, cron.ErrUnknownZone) as well.
	ErrInvalidJob = errors.New("scheduler: invalid job")
	// ErrUnknownJob is returned by operations on a job never registered,
	// or a partition it does not have.
	ErrUnknownJob = errors.New("scheduler: unknown job or partition")
	// ErrStarted is returned by Register after Start, and by a second
	// Start.
	ErrStarted = errors.New("scheduler: already started")
)

// OverlapPolicy says what happens to slots that come due while a run of the
// same job and partition is in progress.
type OverlapPolicy int

// Overlap policies.
const (
	// OverlapForbid (default) skips them: recorded skipped, reason
	// "overlap". Slots an operator asks for are not skipped (Job.Overlap).
	OverlapForbid OverlapPolicy = iota
	// OverlapBufferOne runs the latest of them after the current run and
	// skips the others.
	OverlapBufferOne
	// OverlapCancelOther (Kubernetes' Replace) cancels the running
	// attempt, on whichever replica it runs, and runs the new slot: the
	// claimer records a cancel request in the ledger, the holder sees it
	// at its next heartbeat (every second at most) and its run's ctx ends
	// with cause ErrInterrupted (replaced); the attempt is recorded failed, class
	// interrupted, and not retried. Only an attempt that a later slot came
	// due during is cancelled. Needs a ledger that implements
	// ledger.Canceler (redisledger and ledgertest.Memory do).
	OverlapCancelOther
	// OverlapAllow (Kubernetes' Allow, Temporal's ALLOW_ALL) runs every
	// slot when it comes due, whether or not earlier ones still run: each
	// slot runs under a lease of its own ("<job>|<partition>@<unix>"),
	// and its ledger writes are fenced by its scope (ledger.SlotScope), so runs
	// of one (job, partition) overlap while each slot still runs once.
	// The (job, partition) lease is held only to plan (read the ledger,
	// apply the missed-slot policy, begin the attempts). Its runs start at
	// once and are not bounded by Options.MaxConcurrentClaims (an attempt
	// is never begun and left waiting): bound them with Job.Timeout. The
	// slot lease is "<job>@<unix>" for the default partition "", else
	// "<job>|<partition>@<unix>", so the job name and a partition may
	// together be at most leasedriver.MaxNameLen-12 bytes (244).
	OverlapAllow
)

// String names the policy: "forbid", "buffer_one", "cancel_other",
// "allow" ("unknown" for any other value).
func (p OverlapPolicy) String() string {
	switch p {
	case OverlapForbid:
		return "forbid"
	case OverlapBufferOne:
		return "buffer_one"
	case OverlapCancelOther:
		return "cancel_other"
	case OverlapAllow:
		return "allow"
	}
	return "unknown"
}

// ErrInterrupted matches the context cause of a run the scheduler cancels
// itself, the job being sound: replaced by a newer slot under
// OverlapCancelOther ("...: replaced by a newer slot"), or Stop's grace
// period ran out ("...: shut down past the grace period"). Either way the
// attempt is recorded failed, class ledger.ClassInterrupted; the job
// should return. Match it with errors.Is(context.Cause(ctx),
// ErrInterrupted).
var ErrInterrupted = errors.New("scheduler: run interrupted")

// errReplaced is the cause of a run replaced under OverlapCancelOther.
var errReplaced = fmt.Errorf("%w: replaced by a newer slot (OverlapCancelOther)", ErrInterrupted)

// MissedPolicy says what happens to slots that came due while no replica
// could run them (all down, Redis unreachable, a replica frozen or its
// wall clock jumped forward, a claim later than 5 s), found by gap
// detection from the last slot the ledger saw. A restart and a freeze of
// the same length are treated alike.
type MissedPolicy int

// Missed-slot policies.
const (
	// MissedCatchUp (default) runs them, oldest first, at most MaxCatchUp
	// of the latest ones within CatchUpWindow; older ones are skipped.
	MissedCatchUp MissedPolicy = iota
	// MissedLatestOnly runs only the latest missed slot.
	MissedLatestOnly
	// MissedSkip skips them all (recorded skipped, reason "missed").
	MissedSkip
	// MissedManual records them as StatusMissed; they run only when an
	// operator asks (Scheduler.Retry, Backfill).
	MissedManual
)

// Job is a named schedule and the function it runs.
type Job struct {
	// Name identifies the job (1 to ledger.MaxJobNameLen bytes of printable
	// UTF-8, none of '{', '}', '|' or '@'). It names the lease
	// (ledger.UnitScope) and the ledger records. Printable excludes
	// control (Unicode Cc) and format (Cf: U+200B zero-width space, U+202E
	// right-to-left override, ...) characters, and a name of white space
	// alone is refused: operators tell jobs and tenants apart by these
	// names in the console and the CLI, so no name may look like another.
	// "." and ".." are refused too: the admin API's paths name a job in
	// a segment, and clients resolve those away.
	Name string
	// Spec is a cron spec: 5 fields, 6 with seconds first, a descriptor
	// such as @daily, @every 10s (whole seconds only), optionally prefixed
	// CRON_TZ=<zone>. A spec that never fires is refused.
	Spec string
	// Zone is the IANA zone the spec is read in. Default UTC.
	Zone string
	// DSTGap and DSTFold override the DST rules of fixed-time specs
	// (default cron.GapRunAfter: run once just after a spring-forward gap,
	// the skipped local times; default cron.FoldFirst: run at the first
	// occurrence in a fall-back fold, the repeated local times). See
	// package cron.
	DSTGap  cron.GapPolicy
	DSTFold cron.FoldPolicy
	// Partitions splits every slot by tenant: each partition is a slot
	// dimension with its own lease and ledger records, run in parallel
	// within Options.MaxConcurrentClaims. Default: one partition, "" (the
	// only place an empty key is allowed). Keys are 1 to ledger.MaxPartitionLen
	// bytes of printable UTF-8 (as Name: no control or format character,
	// not blank) without '{', '}', '|' or '@'.
	Partitions []string
	// Run is the work of one slot. Required. ctx ends when the job's
	// lease is lost, Timeout passes, or the scheduler shuts down past its
	// grace period; it carries the run's holder (fence.HolderFromContext,
	// equal to run.Holder()). Return an error to record the attempt as
	// failed: it is retried with backoff until MaxAttempts, unless the
	// error is Permanent or matches fence.ErrScopeMismatch (a sink that
	// fences the write under another lease refuses every attempt alike).
	Run func(ctx context.Context, run Run) error
	// LeaseTTL is the TTL of the job's lease: loss is signalled within it,
	// and a crashed holder's slot is taken over once it ran out, at the
	// unit's next claim (its next fire, a retry or request coming due, a
	// replica's Start), however old the slot is by then. A wake-up (a
	// retry, a request) that finds the lease held claims again after 1 s,
	// backing off to at most 10 s. Default 30 s; at least
	// leasedriver.MinTTL.
	LeaseTTL time.Duration
	// Timeout bounds one attempt (0: none). A run that times out is failed
	// with ClassTimeout and retried.
	Timeout time.Duration
	// MaxAttempts is how many attempts a slot gets. Default 3.
	MaxAttempts int
	// RetryBackoff and RetryMaxBackoff shape the wait before each retry:
	// RetryBackoff * 2^(attempt-1), at most RetryMaxBackoff, ±20% jitter.
	// The next attempt's time is stored in the ledger, so a crash in the
	// wait loses nothing. Defaults 1 s and 5 min (or RetryBackoff, when
	// that is longer); a RetryBackoff above a RetryMaxBackoff that is set
	// is refused (ErrInvalidJob).
	RetryBackoff, RetryMaxBackoff time.Duration
	// MaxDeferrals bounds the deferrals in a row: attempts whose error
	// says to come back later (RetryAfter, httpfence.InFlightError), which
	// are retried after the wait they name (at most 15 min, a longer one
	// is cut) without counting against MaxAttempts. The attempt after
	// that many deferrals in a row that defers again counts as a retryable
	// failure. Default 5; -1: no deferrals, every failure counts.
	MaxDeferrals int
	// Overlap is the overlap policy. Default OverlapForbid. It applies to
	// the slots of the schedule only: a slot an operator asks for
	// (Trigger, Retry, Backfill) is never skipped as overlap. Asked for
	// during a run, it waits for the (job, partition) lease (its claim is
	// tried again every second) and runs after the run, under every policy
	// but OverlapAllow, where it runs at once under its own slot lease; it
	// does not cancel the run under OverlapCancelOther. A scheduled slot
	// that comes due during that run follows the policy (under
	// OverlapForbid it is skipped, reason "overlap"), as Temporal's trigger
	// and `kubectl create job --from=cronjob` are not subject to the
	// schedule's concurrency policy.
	//
	// When every slot must happen (billing: one invoice per slot), use
	// OverlapAllow: every slot runs when it comes due, each once under its
	// own slot lease, so a slow run delays no other slot (runs of one
	// partition then overlap: the downstream must take them side by
	// side). OverlapForbid skips every slot that comes due during a slow
	// run and OverlapBufferOne all but the latest (a trial lost 18 of 39
	// invoices to OverlapForbid while a downstream was slow);
	// OverlapCancelOther interrupts the run. Where runs must not overlap,
	// make each run do the work of every slot since the last one that
	// succeeded and use OverlapBufferOne. Skipped slots show in
	// JobStatus.Skipped (`holdfast job ls`), the alert HoldfastSlotsSkipped
	// (docs/alerts.yml), and can be run later with Backfill.
	Overlap OverlapPolicy
	// Missed is the missed-slot policy. Default MissedCatchUp.
	Missed MissedPolicy
	// CatchUpWindow: slots older than this are not run late, whatever the
	// policy; they are recorded skipped, reason "missed: older than
	// CatchUpWindow" (at most 1000 per claim, the rest logged
	// slots_unrecorded). Not a slot begun and left running by a holder that
	// lost its lease (it crashed): that one is taken over however old. It
	// bounds MaxCatchUp too: with the default 1 h an hourly job catches up
	// one slot at most. Default 1 h.
	CatchUpWindow time.Duration
	// MaxCatchUp bounds how many missed slots one claim runs under
	// MissedCatchUp, within CatchUpWindow. Default 16.
	MaxCatchUp int
	// StartAt and EndAt, when set, bound the slots the job has: those in
	// [StartAt, EndAt), a slot at StartAt included, one at EndAt not;
	// either may fall between whole seconds (a StartAt of 05.4 s and an
	// EndAt of 06.4 s leave an every-second job the one slot at 06 s).
	// An EndAt already past is accepted, so a configuration stays valid
	// after its window closed (its slots can still be listed and
	// retried), and Register logs job_window_ended at warn level: no slot
	// of the job comes due any more.
	StartAt, EndAt time.Time
	// SlotScopeSinks are, for an OverlapAllow job, the fenced resources
	// its runs write under their slot scopes (ledger.SlotScope; the sinks
	// keep a fence per slot). With Options.Retention set, the replica that
	// prunes the ledger then prunes, with the same cutoff, the slot scopes
	// of every partition of the job in each of these
	// (fence.SlotScopePruner), so their per-slot fences stay bounded and a
	// slot pruned from the ledger is closed in the sinks too: a late
	// holder of it is refused whatever its token (fence.ErrScopeClosed).
	// Each prune is logged sink_slot_scopes_pruned; a sink whose store's
	// clock is behind the ledger store's may refuse the cutoff (later than
	// its clock minus fence.PruneMargin: fence.ErrPruneCutoff), logged at
	// warn, closing nothing until a later prune. A run still going
	// when its slot falls behind the cutoff would be refused by these
	// sinks, so the job needs a Timeout below Retention. Only registered
	// partitions are pruned (a partition removed from the code keeps its
	// fences: prune them yourself), and only the resources listed: a
	// resource named per slot or per key cannot be listed (prune it
	// yourself, or retire it). Refused (ErrInvalidJob) under another
	// overlap policy, without Options.Retention, without a Timeout below
	// it, with an empty Resource or a nil Sink.
	SlotScopeSinks []SlotScopeSink
}

// SlotScopeSink is one fenced resource of an OverlapAllow job whose
// per-slot fences the scheduler prunes (Job.SlotScopeSinks).
type SlotScopeSink struct {
	// Resource is the resource the runs write, as they name it to Sink.
	Resource string
	// Sink is where the resource's fences live: redisfence.Writer,
	// httpfence's redisstore.Fence or pgstore.Fence, or a pgfence.Guard
	// through Guard.Pruner(db).
	Sink fence.SlotScopePruner
}

func (j Job) withDefaults() Job {
	if j.LeaseTTL == 0 {
		j.LeaseTTL = defaultLeaseTTL
	}
	if j.MaxAttempts == 0 {
		j.MaxAttempts = defaultMaxAttempts
	}
	if j.RetryBackoff == 0 {
		j.RetryBackoff = defaultRetryBackoff
	}
	if j.RetryMaxBackoff == 0 {
		j.RetryMaxBackoff = max(defaultRetryMaxBackoff, j.RetryBackoff)
	}
	if j.CatchUpWindow == 0 {
		j.CatchUpWindow = defaultCatchUpWindow
	}
	if j.MaxCatchUp == 0 {
		j.MaxCatchUp = defaultMaxCatchUp
	}
	if j.MaxDeferrals == 0 {
		j.MaxDeferrals = defaultMaxDeferrals
	}
	if len(j.Partitions) == 0 {
		j.Partitions = []string{""}
	}
	return j
}

// reserved are the bytes no job name or partition key holds: the braces
// of the Redis ledger's hash tags, and the separators of lease names
// (ledger.PartitionSep, ledger.SlotSep), so that no (job, partition) and
// no slot gets the lease, and so the fence, of another. A job "a@1780000000"
// would otherwise hold the lease of job a's slot at 1780000000 under
// OverlapAllow, and partition "p@5" that of partition p's slot at 5.
const reserved = "{}" + ledger.PartitionSep + ledger.SlotSep

func (j Job) validate() error {
	switch {
	case j.Name == "":
		return fmt.Errorf("%w: empty name", ErrInvalidJob)
	case len(j.Name) > ledger.MaxJobNameLen:
		return fmt.Errorf("%w: name of %d bytes, at most %d", ErrInvalidJob, len(j.Name), ledger.MaxJobNameLen)
	case strings.ContainsAny(j.Name, reserved):
		return fmt.Errorf("%w: name %q holds one of %q", ErrInvalidJob, j.Name, reserved)
	case !safe.Printable(j.Name):
		return fmt.Errorf("%w: name %q is not printable UTF-8 (no control or format character)", ErrInvalidJob, j.Name)
	case safe.Blank(j.Name):
		return fmt.Errorf("%w: name %q is blank", ErrInvalidJob, j.Name)
	case j.Name == "." || j.Name == "..":
		return fmt.Errorf("%w: name %q is a dot segment: the admin API's paths name a job in a segment, which clients resolve away (RFC 3986 §5.2.4)", ErrInvalidJob, j.Name)
	case j.Run == nil:
		return fmt.Errorf("%w: %q has no Run", ErrInvalidJob, j.Name)
	case j.LeaseTTL < 0 || j.CatchUpWindow < 0 || j.MaxAttempts < 0 || j.MaxCatchUp < 0 ||
		j.Timeout < 0 || j.RetryBackoff < 0 || j.RetryMaxBackoff < 0 || j.MaxDeferrals < -1:
		return fmt.Errorf("%w: %q: negative duration or count", ErrInvalidJob, j.Name)
	case j.RetryMaxBackoff != 0 && j.RetryBackoff > j.RetryMaxBackoff:
		return fmt.Errorf("%w: %q: RetryBackoff %v is above RetryMaxBackoff %v", ErrInvalidJob, j.Name, j.RetryBackoff, j.RetryMaxBackoff)
	case j.LeaseTTL != 0 && j.LeaseTTL < leasedriver.MinTTL:
		return fmt.Errorf("%w: %q: LeaseTTL %v is below leasedriver.MinTTL (%v)", ErrInvalidJob, j.Name, j.LeaseTTL, leasedriver.MinTTL)
	case !j.EndAt.IsZero() && !j.EndAt.After(j.StartAt):
		return fmt.Errorf("%w: %q: EndAt %s is not after StartAt %s", ErrInvalidJob, j.Name,
			j.EndAt.UTC().Format(time.RFC3339Nano), j.StartAt.UTC().Format(time.RFC3339Nano))
	case j.Overlap < OverlapForbid || j.Overlap > OverlapAllow:
		return fmt.Errorf("%w: %q: unknown overlap policy %d", ErrInvalidJob, j.Name, j.Overlap)
	case j.Missed < MissedCatchUp || j.Missed > MissedManual:
		return fmt.Errorf("%w: %q: unknown missed-slot policy %d", ErrInvalidJob, j.Name, j.Missed)
	}
	for i, sink := range j.SlotScopeSinks {
		switch {
		case j.Overlap != OverlapAllow:
			return fmt.Errorf("%w: %q: SlotScopeSinks under overlap policy %s: only OverlapAllow's runs write under slot scopes", ErrInvalidJob, j.Name, j.Overlap)
		case sink.Resource == "":
			return fmt.Errorf("%w: %q: SlotScopeSinks[%d]: empty Resource", ErrInvalidJob, j.Name, i)
		case safe.IsNil(sink.Sink):
			return fmt.Errorf("%w: %q: SlotScopeSinks[%d] (%q): nil Sink", ErrInvalidJob, j.Name, i, sink.Resource)
		}
	}
	seen := map[string]bool{}
	for _, p := range j.Partitions {
		switch {
		case len(j.Partitions) > 1 && p == "":
			return fmt.Errorf("%w: %q: empty partition key among several", ErrInvalidJob, j.Name)
		case len(p) > ledger.MaxPartitionLen || strings.ContainsAny(p, reserved) || !safe.Printable(p) || safe.Blank(p):
			return fmt.Errorf("%w: %q: partition %q: at most %d bytes of printable UTF-8 (no control or format character, not blank), none of %q",
				ErrInvalidJob, j.Name, p, ledger.MaxPartitionLen, reserved)
		case seen[p]:
			return fmt.Errorf("%w: %q: partition %q twice", ErrInvalidJob, j.Name, p)
		}
		if j.Overlap == OverlapAllow && len(ledger.SlotScope(ledger.Slot{Job: j.Name, At: time.Unix(1<<33, 0), Partition: p})) > leasedriver.MaxNameLen {
			return fmt.Errorf("%w: %q: partition %q: name and partition too long for OverlapAllow's per-slot leases (at most %d bytes together)",
				ErrInvalidJob, j.Name, p, leasedriver.MaxNameLen-12)
		}
		seen[p] = true
	}
	return nil
}

// Run describes one attempt of a slot, as the job function receives it.
type Run struct {
	ledger.Slot
	// Local is the slot's instant in the job's zone; Zone names it.
	Local time.Time
	Zone  string
	// BusinessDate is the local date of the scheduled wall time,
	// "2006-01-02".
	BusinessDate string
	// Rule is the DST rule that produced the slot (cron.RuleNormal
	// outside transitions).
	Rule cron.Rule
	// Attempt counts from 1.
	Attempt int
	// Token and Owner are the job lease's (under OverlapAllow the slot
	// lease's); present them to every sink as Holder().
	Token fence.Token
	Owner string
	// Scope is the name of the lease Token was issued for: the (job,
	// partition) lease ("<job>" or "<job>|<partition>"), under
	// OverlapAllow the slot lease ("...@<unix>"). Sinks keep their fence
	// per (resource, scope), so the partitions of a job writing one
	// resource never refuse each other (see package fence).
	Scope string
	// IdempotencyKey is Slot.IdempotencyKey(): Slot.Key() while that is
	// at most 255 bytes (ledger.MaxIdempotencyKeyLen, httpfence.MaxKeyLen),
	// a bounded form of it with a SHA-256 suffix beyond (long job names
	// and partitions), injective either way. The same for every attempt,
	// on every replica and in every build; printable ASCII (names outside
	// it percent-encoded), so it can be sent as an HTTP Idempotency-Key as
	// it is (httpfence.FormatKey).
	IdempotencyKey string
}

// Holder returns the run's fence.Holder (Scope, Token, Owner): what to
// present to every sink. The job's ctx carries it as well
// (fence.HolderFromContext).
func (r Run) Holder() fence.Holder {
	return fence.Holder{Scope: r.Scope, Token: r.Token, Owner: r.Owner}
}

// String formats r for people: its slot, attempt, token, scope, owner id
// (fence.OwnerID) and idempotency key, never its owner, a write
// capability (docs/security.md): no fmt verb of a Run, or of a value
// holding one in an exported field, prints it (Format); in an unexported
// field fmt prints it by reflection (see fence.Holder.String).
func (r Run) String() string {
	return fmt.Sprintf("{Job:%q Partition:%q At:%s Attempt:%d Token:%d Scope:%q OwnerID:%s IdempotencyKey:%q}",
		r.Job, r.Partition, r.At.UTC().Format(time.RFC3339), r.Attempt, r.Token, r.Scope, fence.OwnerID(r.Owner), r.IdempotencyKey)
}

// GoString is String, for fmt's %#v.
func (r Run) GoString() string { return "scheduler.Run" + r.String() }

// Format implements fmt.Formatter: %#v prints GoString, %q String quoted,
// every other verb (%d and %x included) String, so no verb prints the
// owner. A struct that keeps a Run in an unexported field is printed by
// reflection, which calls no method: see fence.Holder.String.
func (r Run) Format(f fmt.State, verb rune) { ownerarg.FormatMasked(f, verb, r.String(), r.GoString()) }

// LogValue implements slog.LogValuer: String's fields, the owner id in
// place of the owner.
func (r Run) LogValue() slog.Value {
	return slog.GroupValue(slog.String("job", r.Job), slog.String("partition", r.Partition), slog.Time("slot", r.At),
		slog.Int("attempt", r.Attempt), slog.Uint64("token", uint64(r.Token)), slog.String("scope", r.Scope),
		slog.String("owner_id", fence.OwnerID(r.Owner)), slog.String("idempotency_key", r.IdempotencyKey))
}

// MarshalJSON encodes r's fields as encoding/json would, but for its
// owner: "Owner" is "[owner]", and "OwnerID" its owner id, as fmt and slog
// print it. The JSON of a Run does not decode back into one. A struct
// that embeds a Run marshals as the Run alone (encoding/json calls the
// promoted method): name the field instead.
func (r Run) MarshalJSON() ([]byte, error) {
	type fields Run // Run's fields, without this method
	return json.Marshal(struct {
		fields
		Owner   string // shadows the owner
		OwnerID string
	}{fields(r), ownerarg.Redacted, fence.OwnerID(r.Owner)})
}

// ErrPermanent matches an error wrapped by Permanent:
// errors.Is(err, ErrPermanent). Its text never shows: a Permanent error
// reads as the error it wraps.
var ErrPermanent = errors.New("scheduler: permanent error")

// permanentError marks an error that no retry can fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string        { return e.err.Error() }
func (e *permanentError) Unwrap() error        { return e.err }
func (e *permanentError) Is(target error) bool { return target == ErrPermanent }

// Permanent wraps err so that the attempt fails for good: no retry. The
// result reads as err, matches err with errors.Is and errors.As, and
// matches ErrPermanent. nil for a nil err.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// deferral is what an error says when it is not the job's failure but a
// "come back after RetryAfter" (see RetryAfter).
type deferral interface {
	RetryAfter() time.Duration
}

// retryAfterError is an error wrapped by RetryAfter.
type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string             { return e.err.Error() }
func (e *retryAfterError) Unwrap() error             { return e.err }
func (e *retryAfterError) RetryAfter() time.Duration { return e.after }

// RetryAfter wraps err so that the attempt is deferred, not failed: it is
// tried again after d without counting against Job.MaxAttempts. nil for a
// nil err; err as it is for d <= 0.
//
// Any error in a job's error chain (found with errors.As) with a method
// RetryAfter() time.Duration that returns more than 0 is a deferral, not
// only the ones RetryAfter makes: *httpfence.InFlightError (a downstream
// still holding the request's idempotency key) is one. A deferral is
// recorded with ledger.ClassDeferred and its next attempt's time, now
// plus its RetryAfter (at most 15 min), stored in the ledger like a
// retry's; it does not count against Job.MaxAttempts, up to
// Job.MaxDeferrals deferrals in a row.
func RetryAfter(err error, d time.Duration) error {
	if err == nil || d <= 0 {
		return err
	}
	return &retryAfterError{err: err, after: d}
}

// ErrInvalidArgument matches an operation's bad range or limit, or a slot
// the job does not have (not a fire of its schedule, or outside its
// StartAt/EndAt window), or a nil context.
var ErrInvalidArgument = errors.New("scheduler: invalid argument")
