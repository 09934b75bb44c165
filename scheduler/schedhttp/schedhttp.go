package schedhttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/scheduler"
)

// Action names what an admin request wants to do, for the Authorizer.
type Action string

// Admin actions.
const (
	ActionList     Action = "list"     // GET  /jobs
	ActionRuns     Action = "runs"     // GET  /jobs/{job}/runs, /jobs/{job}/runs/{slot}
	ActionRetry    Action = "retry"    // POST /jobs/{job}/retry
	ActionTrigger  Action = "trigger"  // POST /jobs/{job}/trigger
	ActionBackfill Action = "backfill" // POST /jobs/{job}/backfill
	ActionPause    Action = "pause"    // POST /jobs/{job}/pause
	ActionResume   Action = "resume"   // POST /jobs/{job}/resume
	ActionLeases   Action = "leases"   // GET  /leases
)

// Limits of the list routes.
const (
	// DefaultLimit is the page size of GET /jobs/{job}/runs and GET
	// /leases without a limit (100).
	DefaultLimit = 100
	// MaxLimit is the largest limit they accept (1000).
	MaxLimit = 1000
)

// ErrForbidden is what an Authorizer returns to refuse a request whose
// credentials it accepted (403). Any error refuses the request; one that
// matches neither this nor ErrUnauthenticated answers 403 too.
var ErrForbidden = errors.New("schedhttp: admin request forbidden")

// ErrUnauthenticated is what an Authorizer returns (or wraps) for a
// request without credentials or with credentials it does not accept: the
// handler answers 401 with "WWW-Authenticate: Bearer" (RFC 6750, section
// 3; RFC 9110, section 15.5.2), so a client knows to send a token.
var ErrUnauthenticated = errors.New("schedhttp: admin request unauthenticated")

// ErrInvalidOptions is returned by New for a nil Scheduler.
var ErrInvalidOptions = fmt.Errorf("schedhttp: %w", errfamily.ErrInvalidOptions)

// Options configures the admin handler. The zero value is valid.
type Options struct {
	// Authorizer decides every API request: nil error allows it. Required
	// in practice: with none, the handler refuses every API request (403).
	// GET /openapi.json and the console's static files carry no data and
	// are served without it.
	//
	// Before the Authorizer sees an action (a POST: retry, trigger,
	// backfill, pause, resume), the handler refuses, so that an
	// Authorizer reading a cookie or any other credential a browser sends
	// on its own cannot be driven by another site (cross-site request
	// forgery):
	//   - a cross-origin request (403): one whose Sec-Fetch-Site header is
	//     present and neither "same-origin" nor "none", or, without that
	//     header, whose Origin header is present and names another
	//     host:port than the request's Host; unless its Origin is one of
	//     TrustedOrigins (net/http's CrossOriginProtection decides);
	//   - a body that is not declared JSON (415): every action needs
	//     "Content-Type: application/json", also those without parameters
	//     (send {} or an empty body, with that Content-Type all the same:
	//     an empty POST without it is refused). A form, multipart or
	//     text/plain body, which a page on
	//     another site may send without a CORS preflight, is refused.
	// Requests without Origin and Sec-Fetch-Site (curl, the holdfast CLI,
	// other programs) are not browsers' and pass these checks. Reads (GET)
	// are not checked: they change nothing, and the handler sends no CORS
	// header, so another site's page cannot read their answers.
	Authorizer func(r *http.Request, action Action, job string) error
	// TrustedOrigins are origins ("https://ops.example.com", scheme, host
	// and port, no path) whose pages may send actions across origins: a
	// console served from another host. Default none. A malformed origin
	// is refused by New (ErrInvalidOptions).
	TrustedOrigins []string
	// Leases serves GET /leases (for example the redislease.Backend the
	// scheduler's leases use). Default nil: GET /leases answers 404.
	Leases leasedriver.Inspector
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
// caller likes: at a path ending in "/" (use http.StripPrefix for a
// sub-path, as "/admin/" in the example), since the console page at "/"
// reaches its assets and the API by relative URLs. Requests and answers
// are JSON (the types of wire.go; the API is described by OpenAPI 3.1 at
// GET /openapi.json); errors of the API routes are
// application/problem+json (RFC 9457) with status 400 (bad input, not a
// slot, no partition for one slot of a partitioned job, a body on pause
// other than {}, a malformed match glob), 401 (the Authorizer's
// error matches ErrUnauthenticated; with WWW-Authenticate: Bearer), 403
// (refused by the Authorizer otherwise, or an action from another origin:
// see Options.Authorizer), 404 (unknown job or partition, no record of a
// slot, no lease inspector), 409 (slot running), 413 (body over
// MaxBodyBytes), 415 (an action without Content-Type: application/json)
// or 500. The body of a 401 or 403 does not carry the
// Authorizer's error, nor a 500 the internal (Redis, Postgres) error: both
// go to cfg.Logger instead (admin_request_forbidden at Warn,
// admin_request_failed at Error, with action, job and error), so a client
// learns nothing about the authorizer's reasoning or the backends. An
// unknown path or method gets net/http's plain 404 or 405. New returns an
// error matching ErrInvalidOptions for a nil s or a malformed
// TrustedOrigins entry.
//
//	GET  /jobs                                  JobsPage
//	GET  /jobs/{job}/runs?partition=&from=&to=&status=&limit=&cursor=  RunsPage
//	GET  /jobs/{job}/runs/{slot}?partition=     RunJSON
//	POST /jobs/{job}/retry     RetryRequest     202 SlotResponse
//	POST /jobs/{job}/trigger   TriggerRequest   202 SlotResponse
//	POST /jobs/{job}/backfill  BackfillRequest  202 SlotsResponse
//	POST /jobs/{job}/pause                      PausedResponse
//	POST /jobs/{job}/resume    ResumeRequest    PausedResponse
//	GET  /leases?match=GLOB&limit=N             LeasesPage
//	GET  /openapi.json                          the API's OpenAPI 3.1 document
//	GET  /  and  GET /console/{file}            the web console
//
// Each job route calls the Scheduler operation of its name (Jobs and
// JobStatus, Runs, Record, Retry, Trigger, Backfill, Pause, Resume); 400
// is its ErrInvalidJob or ErrInvalidArgument, 404 its ErrUnknownJob, 409
// ledger.ErrSlotRunning.
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
	cop := http.NewCrossOriginProtection()
	for _, o := range cfg.TrustedOrigins {
		if err := cop.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("%w: TrustedOrigins: %w", ErrInvalidOptions, err)
		}
	}
	h := &adminHandler{s: s, cfg: cfg, cop: cop}
	return h.mux(), nil
}

// mux serves h's routes.
func (h *adminHandler) mux() *http.ServeMux {
	mux := http.NewServeMux()
	for _, rt := range h.routes() {
		if rt.action == "" {
			mux.HandleFunc(rt.pattern, rt.static)
			continue
		}
		mux.HandleFunc(rt.pattern, h.guard(rt.action, rt.api))
	}
	return mux
}

// route is one pattern of the handler's mux: an API route (action and
// api set) or a static one (static set), served without the Authorizer.
type route struct {
	pattern string
	action  Action
	api     func(http.ResponseWriter, *http.Request) error
	static  http.HandlerFunc
}

// routes is the one list of what the handler serves (openapi_test checks
// it against openapi.json).
func (h *adminHandler) routes() []route {
	return []route{
		{pattern: "GET /jobs", action: ActionList, api: h.jobs},
		{pattern: "GET /jobs/{job}/runs", action: ActionRuns, api: h.runs},
		{pattern: "GET /jobs/{job}/runs/{slot}", action: ActionRuns, api: h.run},
		{pattern: "POST /jobs/{job}/retry", action: ActionRetry, api: h.retry},
		{pattern: "POST /jobs/{job}/trigger", action: ActionTrigger, api: h.trigger},
		{pattern: "POST /jobs/{job}/backfill", action: ActionBackfill, api: h.backfill},
		{pattern: "POST /jobs/{job}/pause", action: ActionPause, api: h.pause},
		{pattern: "POST /jobs/{job}/resume", action: ActionResume, api: h.resume},
		{pattern: "GET /leases", action: ActionLeases, api: h.leases},
		{pattern: "GET /openapi.json", static: serveOpenAPI},
		{pattern: "GET /{$}", static: serveConsolePage},
		{pattern: "GET /console/{file}", static: serveConsoleFile},
	}
}

type adminHandler struct {
	s   *scheduler.Scheduler
	cfg Options
	cop *http.CrossOriginProtection // refuses cross-origin actions
}

func (h *adminHandler) guard(action Action, next func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		job := r.PathValue("job")
		if r.Method == http.MethodPost && !h.actionAllowed(w, r, action, job) {
			return
		}
		if h.cfg.Authorizer == nil {
			writeProblem(w, http.StatusForbidden, "forbidden", "", "no authorizer configured: every admin request is refused")
			return
		}
		if err := h.cfg.Authorizer(r, action, job); err != nil {
			h.cfg.Logger.LogAttrs(r.Context(), slog.LevelWarn, "admin_request_forbidden",
				slog.String("action", string(action)), slog.String("job", job), slog.Any("error", err))
			if errors.Is(err, ErrUnauthenticated) {
				w.Header().Set("WWW-Authenticate", "Bearer")
				writeProblem(w, http.StatusUnauthorized, "unauthenticated", "", "credentials missing or not accepted")
				return
			}
			writeProblem(w, http.StatusForbidden, "forbidden", "", "refused by the authorizer")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes)
		if err := next(w, r); err != nil {
			status, kind, field := problemOf(err)
			if status == http.StatusInternalServerError {
				h.cfg.Logger.LogAttrs(r.Context(), slog.LevelError, "admin_request_failed",
					slog.String("action", string(action)), slog.String("job", job), slog.Any("error", err))
				writeProblem(w, status, kind, "", "internal error; see the server log")
				return
			}
			writeProblem(w, status, kind, field, clipQuoted(err.Error()))
		}
	}
}

// actionAllowed refuses, before the Authorizer, a cross-origin action
// (403) and one whose body is not declared application/json (415); see
// Options.Authorizer. It writes the refusal and logs it
// (admin_request_forbidden, reason cross_origin or content_type).
func (h *adminHandler) actionAllowed(w http.ResponseWriter, r *http.Request, action Action, job string) bool {
	refuse := func(status int, reason, kind, detail string, err error) bool {
		h.cfg.Logger.LogAttrs(r.Context(), slog.LevelWarn, "admin_request_forbidden",
			slog.String("action", string(action)), slog.String("job", job), slog.String("reason", reason),
			slog.String("origin", r.Header.Get("Origin")), slog.String("sec_fetch_site", r.Header.Get("Sec-Fetch-Site")),
			slog.Any("error", err))
		writeProblem(w, status, kind, "", detail)
		return false
	}
	if err := h.cop.Check(r); err != nil {
		return refuse(http.StatusForbidden, "cross_origin", "cross-origin", "cross-origin request refused (Origin or Sec-Fetch-Site)", err)
	}
	if tooLarge(r, h.cfg.MaxBodyBytes) { // 413 whatever the body's type
		return refuse(http.StatusRequestEntityTooLarge, "body_too_large", "body-too-large",
			fmt.Sprintf("body over %d bytes", h.cfg.MaxBodyBytes), errors.New("body too large"))
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		if err == nil {
			err = fmt.Errorf("media type %q is not application/json", mt)
		}
		w.Header().Set("Accept-Post", "application/json")
		return refuse(http.StatusUnsupportedMediaType, "content_type", "unsupported-media-type", "actions take Content-Type: application/json", err)
	}
	return true
}

// decodeEmpty reads a body that carries nothing (pause): empty or
// the JSON object {}; anything else (null, a member, trailing data after
// the {}) is a bad request, and a body over MaxBodyBytes is refused (413)
// as on every POST.
func decodeEmpty(r *http.Request) error {
	b, err := readBody(r)
	if err != nil || b == nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var none *struct{}
	if err := dec.Decode(&none); err != nil {
		return fmt.Errorf("%w: body: want none or {}: %w", errBadRequest, err)
	}
	if none == nil {
		return fmt.Errorf("%w: body: want none or {}, not null", errBadRequest)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("%w: body: want none or {}, and nothing after it", errBadRequest)
	}
	return nil
}

// tooLarge reports whether r's body is over max bytes: by its
// Content-Length, or, for a body of unknown length, by reading it up to
// max+1 bytes (what it read is put back in front of the rest).
func tooLarge(r *http.Request, max int64) bool {
	switch {
	case r.ContentLength > max:
		return true
	case r.ContentLength >= 0 || r.Body == nil || r.Body == http.NoBody:
		return false
	}
	head, _ := io.ReadAll(io.LimitReader(r.Body, max+1))
	r.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
	return int64(len(head)) > max
}

var (
	errBadRequest = errors.New("schedhttp: bad admin request")
	errNotFound   = errors.New("schedhttp: not found")
)

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // the status is out: nothing to do about a broken connection
	return nil
}
