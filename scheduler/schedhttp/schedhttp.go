package schedhttp

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// Action names what an admin request wants to do, for the Authorizer.
type Action string

// Admin actions.
const (
	ActionList     Action = "list"     // GET  /jobs
	ActionRuns     Action = "runs"     // GET  /jobs/{job}/runs
	ActionRetry    Action = "retry"    // POST /jobs/{job}/retry
	ActionTrigger  Action = "trigger"  // POST /jobs/{job}/trigger
	ActionBackfill Action = "backfill" // POST /jobs/{job}/backfill
	ActionPause    Action = "pause"    // POST /jobs/{job}/pause
	ActionResume   Action = "resume"   // POST /jobs/{job}/resume
)

// ErrForbidden is what an Authorizer returns to refuse a request (any
// error refuses it; this one is provided for convenience).
var ErrForbidden = errors.New("schedhttp: admin request forbidden")

// ErrInvalidOptions is returned by New for a nil Scheduler.
var ErrInvalidOptions = errors.New("schedhttp: invalid options")

// Options configures the admin handler. The zero value is valid.
type Options struct {
	// Authorizer decides every request: nil error allows it. Required in
	// practice: with none, the handler refuses every request (403).
	Authorizer func(r *http.Request, action Action, job string) error
	// MaxBodyBytes bounds request bodies. Default 64 KiB.
	MaxBodyBytes int64
	// Logger receives admin_request_forbidden and admin_request_failed.
	// Default: discard; pass the scheduler's (scheduler.Options.Logger).
	Logger *slog.Logger
	// Clock gives the default end of GET /jobs/{job}/runs (now + 1 s).
	// Default clock.Real(); pass the scheduler's (scheduler.Options.Clock).
	Clock clock.Clock
}

// New returns an http.Handler for the operators of s, mounted wherever the
// caller likes (use http.StripPrefix for a sub-path). Requests and answers
// are JSON; errors of the routes below are application/problem+json
// (RFC 9457) with status 400 (bad input, not a slot), 403 (refused by the
// Authorizer), 404 (unknown job or partition), 409 (slot running), 413
// (body over MaxBodyBytes) or 500. The body of a 403 does not carry the
// Authorizer's error, nor a 500 the internal (Redis, Postgres) error: both
// go to cfg.Logger instead (admin_request_forbidden at Warn,
// admin_request_failed at Error, with action, job and error), so a client
// learns nothing about the authorizer's reasoning or the backends. An
// unknown path or method gets net/http's plain 404 or 405. New returns an
// error matching ErrInvalidOptions for a nil s.
//
//	GET  /jobs
//	GET  /jobs/{job}/runs?partition=&from=RFC3339&to=RFC3339&limit=N
//	POST /jobs/{job}/retry     {"partition":"", "slot":"RFC3339", "reason":"..."}
//	POST /jobs/{job}/trigger   {"partition":"", "reason":"..."}
//	POST /jobs/{job}/backfill  {"partition":"", "from":"RFC3339", "to":"RFC3339", "reason":"..."}
//	POST /jobs/{job}/pause
//	POST /jobs/{job}/resume
//
// Each route calls the Scheduler operation of the same name (Jobs, Runs,
// Retry, Trigger, Backfill, Pause, Resume); 400 is its ErrInvalidJob or
// ErrInvalidArgument, 404 its ErrUnknownJob, 409 ledger.ErrSlotRunning.
func New(s *scheduler.Scheduler, cfg Options) (http.Handler, error) {
	if s == nil {
		return nil, fmt.Errorf("%w: nil Scheduler", ErrInvalidOptions)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 64 << 10
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	h := &adminHandler{s: s, cfg: cfg}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jobs", h.guard(ActionList, h.jobs))
	mux.HandleFunc("GET /jobs/{job}/runs", h.guard(ActionRuns, h.runs))
	mux.HandleFunc("POST /jobs/{job}/retry", h.guard(ActionRetry, h.retry))
	mux.HandleFunc("POST /jobs/{job}/trigger", h.guard(ActionTrigger, h.trigger))
	mux.HandleFunc("POST /jobs/{job}/backfill", h.guard(ActionBackfill, h.backfill))
	mux.HandleFunc("POST /jobs/{job}/pause", h.guard(ActionPause, h.pause))
	mux.HandleFunc("POST /jobs/{job}/resume", h.guard(ActionResume, h.resume))
	return mux, nil
}

type adminHandler struct {
	s   *scheduler.Scheduler
	cfg Options
}

type adminRequest struct {
	Partition string    `json:"partition"`
	Slot      time.Time `json:"slot"`
	From      time.Time `json:"from"`
	To        time.Time `json:"to"`
	Reason    string    `json:"reason"`
}

func (h *adminHandler) guard(action Action, next func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		job := r.PathValue("job")
		if h.cfg.Authorizer == nil {
			writeProblem(w, http.StatusForbidden, "no authorizer configured: every admin request is refused")
			return
		}
		if err := h.cfg.Authorizer(r, action, job); err != nil {
			h.cfg.Logger.LogAttrs(r.Context(), slog.LevelWarn, "admin_request_forbidden",
				slog.String("action", string(action)), slog.String("job", job), slog.Any("error", err))
			writeProblem(w, http.StatusForbidden, "refused by the authorizer")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes)
		if err := next(w, r); err != nil {
			status := statusOf(err)
			if status == http.StatusInternalServerError {
				h.cfg.Logger.LogAttrs(r.Context(), slog.LevelError, "admin_request_failed",
					slog.String("action", string(action)), slog.String("job", job), slog.Any("error", err))
				writeProblem(w, status, "internal error; see the server log")
				return
			}
			writeProblem(w, status, err.Error())
		}
	}
}

func (h *adminHandler) decode(r *http.Request) (adminRequest, error) {
	var req adminRequest
	if r.ContentLength == 0 {
		return req, nil
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("%w: body: %w", errBadRequest, err)
	}
	return req, nil
}

func (h *adminHandler) jobs(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, h.s.Jobs())
}

func (h *adminHandler) runs(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	to, from := h.cfg.Clock.Now().Add(time.Second), time.Time{}
	limit := 100
	var err error
	if v := q.Get("from"); v != "" {
		if from, err = time.Parse(time.RFC3339, v); err != nil {
			return fmt.Errorf("%w: from: %v", errBadRequest, err)
		}
	}
	if v := q.Get("to"); v != "" {
		if to, err = time.Parse(time.RFC3339, v); err != nil {
			return fmt.Errorf("%w: to: %v", errBadRequest, err)
		}
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 1000 {
			return fmt.Errorf("%w: limit: want 1 to 1000", errBadRequest)
		}
	}
	recs, err := h.s.Runs(r.Context(), r.PathValue("job"), q.Get("partition"), from, to, limit)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, recs)
}

func (h *adminHandler) retry(w http.ResponseWriter, r *http.Request) error {
	req, err := h.decode(r)
	if err != nil {
		return err
	}
	if req.Slot.IsZero() {
		return fmt.Errorf("%w: slot is required", errBadRequest)
	}
	if err := h.s.Retry(r.Context(), r.PathValue("job"), req.Partition, req.Slot, req.Reason); err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, ledger.Slot{Job: r.PathValue("job"), At: req.Slot.UTC(), Partition: req.Partition})
}

func (h *adminHandler) trigger(w http.ResponseWriter, r *http.Request) error {
	req, err := h.decode(r)
	if err != nil {
		return err
	}
	slot, err := h.s.Trigger(r.Context(), r.PathValue("job"), req.Partition, req.Reason)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, slot)
}

func (h *adminHandler) backfill(w http.ResponseWriter, r *http.Request) error {
	req, err := h.decode(r)
	if err != nil {
		return err
	}
	if req.From.IsZero() || !req.To.After(req.From) {
		return fmt.Errorf("%w: want from < to", errBadRequest)
	}
	slots, err := h.s.Backfill(r.Context(), r.PathValue("job"), req.Partition, req.From, req.To, req.Reason)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, slots)
}

func (h *adminHandler) pause(w http.ResponseWriter, r *http.Request) error {
	if err := h.s.Pause(r.Context(), r.PathValue("job")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (h *adminHandler) resume(w http.ResponseWriter, r *http.Request) error {
	if err := h.s.Resume(r.Context(), r.PathValue("job")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

var errBadRequest = errors.New("schedhttp: bad admin request")

func statusOf(err error) int {
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, errBadRequest), errors.Is(err, scheduler.ErrInvalidJob), errors.Is(err, scheduler.ErrInvalidArgument):
		return http.StatusBadRequest
	case errors.Is(err, scheduler.ErrUnknownJob):
		return http.StatusNotFound
	case errors.Is(err, ledger.ErrSlotRunning):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the status is out: nothing to do about a broken connection
	return nil
}

func writeProblem(w http.ResponseWriter, status int, detail string) {
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type": "about:blank", "title": http.StatusText(status), "status": status, "detail": detail,
	})
}
