package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler/cron"
)

// Defaults for Job fields.
const (
	// DefaultLeaseTTL is the TTL of a job's lease (30 s).
	DefaultLeaseTTL = 30 * time.Second
	// DefaultMaxAttempts is how many attempts a slot gets (3).
	DefaultMaxAttempts = 3
	// DefaultCatchUpWindow bounds how far back missed and unfinished slots
	// are run (1 h).
	DefaultCatchUpWindow = time.Hour
	// DefaultMaxCatchUp bounds how many earlier slots one claim runs (16).
	DefaultMaxCatchUp = 16
	// MaxJobNameLen is the longest job name in bytes.
	MaxJobNameLen = 200
)

// Errors for bad input, returned by Register before anything runs.
var (
	// ErrInvalidJob matches every rejected Job: empty or oversized name,
	// a name holding '{', '}' or '|', a nil Run, negative durations, or
	// EndAt before StartAt. Spec and zone errors wrap cron's errors
	// (cron.ErrInvalidSpec, cron.ErrUnknownZone) as well.
	ErrInvalidJob = errors.New("scheduler: invalid job")
	// ErrDuplicateJob is returned when a job of that name is registered.
	ErrDuplicateJob = errors.New("scheduler: job already registered")
	// ErrStarted is returned by Register after Start, and by a second
	// Start.
	ErrStarted = errors.New("scheduler: already started")
)

// JobFunc does the work of one slot. ctx ends when the job's lease is lost,
// the scheduler shuts down past its grace period, or the run times out; it
// carries the run's fencing token (fence.FromContext). Return an error to
// record the attempt as failed; the slot is retried at a later claim until
// Job.MaxAttempts.
type JobFunc func(ctx context.Context, run Run) error

// Job is a named schedule and the function it runs.
type Job struct {
	// Name identifies the job (1 to MaxJobNameLen bytes, no '{', '}' or
	// '|'). It names the lease and the ledger records.
	Name string
	// Spec is a cron spec: 5 fields, 6 with seconds first, a descriptor
	// such as @daily, @every 10s, optionally prefixed CRON_TZ=<zone>.
	Spec string
	// Zone is the IANA zone the spec is read in. Default UTC.
	Zone string
	// Run is the work. Required.
	Run JobFunc
	// LeaseTTL is the TTL of the job's lease, at least lease.MinTTL.
	// Default DefaultLeaseTTL.
	LeaseTTL time.Duration
	// MaxAttempts is how many attempts a slot gets. Default
	// DefaultMaxAttempts.
	MaxAttempts int
	// CatchUpWindow: slots older than this are not run late. Default
	// DefaultCatchUpWindow.
	CatchUpWindow time.Duration
	// MaxCatchUp bounds how many earlier slots one claim runs. Default
	// DefaultMaxCatchUp.
	MaxCatchUp int
	// StartAt and EndAt, when set, bound the slots the job has: none
	// before StartAt, none at or after EndAt.
	StartAt, EndAt time.Time
}

func (j Job) withDefaults() Job {
	if j.LeaseTTL == 0 {
		j.LeaseTTL = DefaultLeaseTTL
	}
	if j.MaxAttempts == 0 {
		j.MaxAttempts = DefaultMaxAttempts
	}
	if j.CatchUpWindow == 0 {
		j.CatchUpWindow = DefaultCatchUpWindow
	}
	if j.MaxCatchUp == 0 {
		j.MaxCatchUp = DefaultMaxCatchUp
	}
	return j
}

func (j Job) validate() error {
	switch {
	case j.Name == "":
		return fmt.Errorf("%w: empty name", ErrInvalidJob)
	case len(j.Name) > MaxJobNameLen:
		return fmt.Errorf("%w: name of %d bytes, at most %d", ErrInvalidJob, len(j.Name), MaxJobNameLen)
	case strings.ContainsAny(j.Name, "{}|"):
		return fmt.Errorf("%w: name %q holds '{', '}' or '|'", ErrInvalidJob, j.Name)
	case j.Run == nil:
		return fmt.Errorf("%w: %q has no Run", ErrInvalidJob, j.Name)
	case j.LeaseTTL < 0 || j.CatchUpWindow < 0 || j.MaxAttempts < 0 || j.MaxCatchUp < 0:
		return fmt.Errorf("%w: %q: negative LeaseTTL, CatchUpWindow, MaxAttempts or MaxCatchUp", ErrInvalidJob, j.Name)
	case j.LeaseTTL != 0 && j.LeaseTTL < lease.MinTTL:
		// The lease could never be acquired: the job would never run.
		return fmt.Errorf("%w: %q: LeaseTTL %v below lease.MinTTL %v", ErrInvalidJob, j.Name, j.LeaseTTL, lease.MinTTL)
	case !j.EndAt.IsZero() && !j.EndAt.After(j.StartAt):
		return fmt.Errorf("%w: %q: EndAt %v is not after StartAt %v", ErrInvalidJob, j.Name, j.EndAt, j.StartAt)
	}
	return nil
}

// Slot identifies one scheduled execution: the job, the scheduled instant
// in UTC (second precision) and the partition. Every replica computes the
// same Slot from the schedule, whenever its own timer fires.
type Slot struct {
	Job       string
	At        time.Time
	Partition string
}

// Key is the slot's idempotency key, "job:2006-01-02T15:04:05Z:partition":
// the same for every attempt of the slot, on every replica.
func (s Slot) Key() string {
	return s.Job + ":" + s.At.UTC().Format(time.RFC3339) + ":" + s.Partition
}

// Run describes one attempt of a slot, as the job function receives it.
type Run struct {
	Slot
	// Local is the slot's instant in the job's zone; Zone names it.
	Local time.Time
	Zone  string
	// BusinessDate is the local date of the slot, "2006-01-02".
	BusinessDate string
	// Attempt counts from 1.
	Attempt int
	// Token and Owner are the job lease's; present them to every sink.
	Token fence.Token
	Owner string
	// IdempotencyKey is Slot.Key().
	IdempotencyKey string
}

type registered struct {
	Job
	schedule *cron.Schedule
}
