package schedhttp

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/fence"
)

// The wire types below are the JSON bodies of the admin API, shared by the
// handler (which encodes them) and clients such as the holdfast CLI (which
// decode them). Field names are snake_case; zero times and empty strings
// are omitted; fencing tokens are decimal strings (safe beyond 2^53 in
// JavaScript); durations are integer milliseconds in fields named *_ms.
// Decode each answer into a zero value: an omitted field leaves what the
// variable held before.

// TimeLayout is how the admin API writes times: RFC 3339 in UTC with
// milliseconds ("2026-12-01T10:00:00.000Z"). Any RFC 3339 time is read.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// Time is a time.Time written in TimeLayout, in UTC. Its zero value is
// omitted from a struct by the omitzero option.
type Time struct{ time.Time }

// MarshalJSON writes t in TimeLayout, UTC.
func (t Time) MarshalJSON() ([]byte, error) {
	return json.Marshal(t.UTC().Format(TimeLayout))
}

// UnmarshalJSON reads an RFC 3339 string.
func (t *Time) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("schedhttp: time: %w", err)
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	if err != nil { // time.Parse's error repeats the input: say it short
		return fmt.Errorf("schedhttp: time %s: want RFC 3339 (2026-12-05T02:00:00Z)", echo(s))
	}
	t.Time = v
	return nil
}

// JobJSON is one job of GET /jobs. LastStatus, LastSlot come from the
// ledger's newest record across the job's partitions; LastSuccess is the
// newest succeeded slot and LagMS its succeeded attempt's start minus the
// slot time (nil when the job has no success in the window read).
type JobJSON struct {
	Name       string   `json:"name"`
	Schedule   string   `json:"schedule"`
	Zone       string   `json:"zone,omitempty"`
	Partitions []string `json:"partitions"`
	Overlap    string   `json:"overlap,omitempty"`
	Paused     bool     `json:"paused"`
	NextFire   Time     `json:"next_fire,omitzero"`
	// EndAt is the job's Job.EndAt (absent: none); Ended reports that it
	// has passed: no slot comes due any more.
	EndAt       Time   `json:"end_at,omitzero"`
	Ended       bool   `json:"ended,omitempty"`
	LastStatus  string `json:"last_status,omitempty"`
	LastSlot    Time   `json:"last_slot,omitzero"`
	LastSuccess Time   `json:"last_success,omitzero"`
	LagMS       *int64 `json:"lag_ms,omitempty"`
	// RecentSkipped and RecentFailed count the job's records with a slot
	// at or after RecentSince (an hour ago, or later on a busy job):
	// skipped or missed, failed or abandoned (scheduler.JobStatus).
	RecentSkipped int  `json:"recent_skipped"`
	RecentFailed  int  `json:"recent_failed"`
	RecentSince   Time `json:"recent_since"`
}

// JobsPage is the body of GET /jobs.
type JobsPage struct {
	Jobs []JobJSON `json:"jobs"`
}

// AttemptJSON is one attempt of a run. It shows the attempt's owner only
// as OwnerID (fence.OwnerID): the owner with the token is a write
// capability, and a reader of this API must not be able to write as the
// holder. Holder is the holder label of the replica that ran it.
type AttemptJSON struct {
	N          int         `json:"n"`
	Token      fence.Token `json:"token,string"`
	OwnerID    string      `json:"owner_id,omitempty"`
	Holder     string      `json:"holder,omitempty"`
	Status     string      `json:"status"`
	ErrorClass string      `json:"error_class,omitempty"`
	Error      string      `json:"error,omitempty"`
	Started    Time        `json:"started,omitzero"`
	Heartbeat  Time        `json:"heartbeat,omitzero"`
	Finished   Time        `json:"finished,omitzero"`
}

// RunJSON is one slot's logical run: GET /jobs/{job}/runs/{slot} and the
// items of GET /jobs/{job}/runs. Attempt is the latest attempt's number
// (0 before the first).
type RunJSON struct {
	Job       string        `json:"job"`
	Partition string        `json:"partition,omitempty"`
	Slot      Time          `json:"slot"`
	Status    string        `json:"status"`
	Attempt   int           `json:"attempt"`
	RetryAt   Time          `json:"retry_at,omitzero"`
	Reason    string        `json:"reason,omitempty"`
	Attempts  []AttemptJSON `json:"attempts,omitempty"`
}

// RunsPage is the body of GET /jobs/{job}/runs. NextCursor, when set, is
// the cursor query parameter of the next page; it is omitted on the last.
type RunsPage struct {
	Runs       []RunJSON `json:"runs"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// SlotJSON names one slot.
type SlotJSON struct {
	Job       string `json:"job"`
	Partition string `json:"partition,omitempty"`
	Slot      Time   `json:"slot"`
}

// SlotResponse is the body of POST retry and trigger (202).
type SlotResponse struct {
	Slot SlotJSON `json:"slot"`
	// Paused is true when the job is paused: the run is recorded but
	// waits until the job is resumed (POST resume). Omitted when false,
	// or when the pause flag could not be read after the request was
	// recorded.
	Paused bool `json:"paused,omitempty"`
}

// SlotsResponse is the body of POST backfill (202): the slots asked for.
type SlotsResponse struct {
	Slots []SlotJSON `json:"slots"`
	// Paused is as SlotResponse's: the slots wait until the job is
	// resumed.
	Paused bool `json:"paused,omitempty"`
}

// PausedResponse is the body of POST pause and resume (200).
type PausedResponse struct {
	Job    string `json:"job"`
	Paused bool   `json:"paused"`
}

// LeaseJSON is one lease of GET /leases. OwnerID (fence.OwnerID of the
// holder's owner, never the owner: a write capability), Holder (the
// holder label, lease.Options.Holder) and TTLMS are set only when Held;
// Token is the name's fencing counter (the holder's token when held, "0"
// when none was ever issued).
type LeaseJSON struct {
	Name    string      `json:"name"`
	Held    bool        `json:"held"`
	OwnerID string      `json:"owner_id,omitempty"`
	Holder  string      `json:"holder,omitempty"`
	TTLMS   int64       `json:"ttl_ms,omitempty"`
	Token   fence.Token `json:"token,string"`
	Waiting bool        `json:"waiting"`
}

// LeasesPage is the body of GET /leases.
type LeasesPage struct {
	Leases []LeaseJSON `json:"leases"`
}

// RetryRequest is the body of POST /jobs/{job}/retry.
// Partition is required (400) for a job with partitions, empty for one
// without.
type RetryRequest struct {
	Partition string `json:"partition"`
	Slot      Time   `json:"slot"`
	Reason    string `json:"reason,omitempty"`
}

// TriggerRequest is the body of POST /jobs/{job}/trigger.
// Partition is required (400) for a job with partitions, empty for one
// without.
type TriggerRequest struct {
	Partition string `json:"partition"`
	Reason    string `json:"reason,omitempty"`
}

// BackfillRequest is the body of POST /jobs/{job}/backfill: the slots
// with From <= slot < To. Partition is required (400) for a job with
// partitions, empty for one without.
type BackfillRequest struct {
	Partition string `json:"partition"`
	From      Time   `json:"from"`
	To        Time   `json:"to"`
	Reason    string `json:"reason,omitempty"`
}

// ResumeRequest is the body of POST /jobs/{job}/resume (optional: an
// empty body or {} resumes and catches the paused slots up as the job's
// missed-slot policy says). SkipPaused records them skipped instead
// (scheduler.Scheduler.Resume's skipPaused).
type ResumeRequest struct {
	SkipPaused bool `json:"skip_paused,omitempty"`
}

// Problem is an error body (application/problem+json, RFC 9457). Type is
// ProblemBase + the problem's name (ProblemBase lists them); Detail repeats
// at most a few dozen bytes of any input it quotes.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Field names the request's field (a body member or a query
	// parameter) a 400 is about; absent when the problem is not about one.
	Field string `json:"field,omitempty"`
}
