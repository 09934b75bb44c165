package schedhttp_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

func newAdminScheduler(t *testing.T) (*scheduler.Scheduler, *redisledger.Ledger) {
	t.Helper()
	rdb := redistest.Mini(t)
	leases, err := lease.New(rdb, lease.Options{})
	require.NoError(t, err)
	ldg, err := redisledger.New(rdb, redisledger.Options{})
	require.NoError(t, err)
	s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ldg})
	require.NoError(t, err)
	require.NoError(t, s.Register(scheduler.Job{
		Name: "settle", Spec: "0 2 * * *", Zone: "Europe/Berlin", Partitions: []string{"eu", "us"},
		Run: func(context.Context, scheduler.Run) error { return nil },
	}))
	return s, ldg
}

func TestAdminHandlerStatusCodes(t *testing.T) {
	t.Parallel()
	s, ldg := newAdminScheduler(t)
	allow := func(*http.Request, schedhttp.Action, string) error { return nil }
	refuse := func(*http.Request, schedhttp.Action, string) error { return schedhttp.ErrForbidden }
	slot := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC) // 02:00 in Berlin
	running := time.Date(2026, 11, 28, 1, 0, 0, 0, time.UTC)
	_, _, err := ldg.Begin(context.Background(), ledger.Slot{Job: "settle", At: running, Partition: "eu"},
		ledger.Fence{Scope: "settle|eu", Token: 1_700_000_000_000_001, Owner: "holder"}, 3, time.Now())
	require.NoError(t, err)

	for _, tc := range []struct {
		name       string
		auth       func(*http.Request, schedhttp.Action, string) error
		method     string
		path, body string
		want       int
	}{
		{"NoAuthorizerRefusesEverything", nil, "GET", "/jobs", "", http.StatusForbidden},
		{"AuthorizerRefusal", refuse, "POST", "/jobs/settle/pause", "", http.StatusForbidden},
		{"ListJobs", allow, "GET", "/jobs", "", http.StatusOK},
		{"UnknownJob", allow, "POST", "/jobs/nope/pause", "", http.StatusNotFound},
		{"UnknownPartition", allow, "POST", "/jobs/settle/trigger", `{"partition":"asia"}`, http.StatusNotFound},
		// A partitioned job's slot is one partition's: naming none is an
		// incomplete request (400), as on GET /runs/{slot}, not an unknown
		// partition (404).
		{"TriggerNeedsPartition", allow, "POST", "/jobs/settle/trigger", `{"reason":"month end"}`, http.StatusBadRequest},
		{"RetryNeedsPartition", allow, "POST", "/jobs/settle/retry", `{"slot":"2026-11-29T01:00:00Z"}`, http.StatusBadRequest},
		{"BackfillNeedsPartition", allow, "POST", "/jobs/settle/backfill", `{"from":"2026-11-20T00:00:00Z","to":"2026-11-23T00:00:00Z"}`, http.StatusBadRequest},
		{"RunNeedsPartition", allow, "GET", "/jobs/settle/runs/2026-11-29T01:00:00Z", "", http.StatusBadRequest},
		{"MalformedBody", allow, "POST", "/jobs/settle/retry", `{"slot":`, http.StatusBadRequest},
		{"UnknownField", allow, "POST", "/jobs/settle/retry", `{"slott":"2026-11-29T01:00:00Z"}`, http.StatusBadRequest},
		{"RetryNeedsSlot", allow, "POST", "/jobs/settle/retry", `{"partition":"eu"}`, http.StatusBadRequest},
		{"RetryOfNonSlot", allow, "POST", "/jobs/settle/retry", `{"partition":"eu","slot":"2026-11-29T01:30:00Z"}`, http.StatusBadRequest},
		{"RetryOfRunningSlot", allow, "POST", "/jobs/settle/retry", `{"partition":"eu","slot":"2026-11-28T01:00:00Z"}`, http.StatusConflict},
		{"Retry", allow, "POST", "/jobs/settle/retry", `{"partition":"eu","slot":"2026-11-29T01:00:00Z","reason":"bank was down"}`, http.StatusAccepted},
		{"Trigger", allow, "POST", "/jobs/settle/trigger", `{"partition":"us","reason":"month end"}`, http.StatusAccepted},
		{"BackfillNeedsRange", allow, "POST", "/jobs/settle/backfill", `{"partition":"us","from":"2026-11-20T00:00:00Z"}`, http.StatusBadRequest},
		{"Backfill", allow, "POST", "/jobs/settle/backfill", `{"partition":"us","from":"2026-11-20T00:00:00Z","to":"2026-11-23T00:00:00Z"}`, http.StatusAccepted},
		{"Runs", allow, "GET", "/jobs/settle/runs?partition=eu&limit=10", "", http.StatusOK},
		{"RunsBadLimit", allow, "GET", "/jobs/settle/runs?limit=0", "", http.StatusBadRequest},
		{"OversizedBody", allow, "POST", "/jobs/settle/trigger", `{"reason":"` + strings.Repeat("x", 70<<10) + `"}`, http.StatusRequestEntityTooLarge},
		{"PauseOversizedBody", allow, "POST", "/jobs/settle/pause", `{"x":"` + strings.Repeat("x", 70<<10) + `"}`, http.StatusRequestEntityTooLarge},
		{"PauseOversizedNonJSON", allow, "POST", "/jobs/settle/pause", strings.Repeat("x", 70<<10), http.StatusRequestEntityTooLarge},
		{"PauseNonJSONBody", allow, "POST", "/jobs/settle/pause", "now please", http.StatusBadRequest},
		{"ResumeNonJSONBody", allow, "POST", "/jobs/settle/resume", "now please", http.StatusBadRequest},
		{"PauseUnknownField", allow, "POST", "/jobs/settle/pause", `{"reason":"x"}`, http.StatusBadRequest},
		{"PauseEmptyObject", allow, "POST", "/jobs/settle/pause", `{}`, http.StatusOK},
		{"Pause", allow, "POST", "/jobs/settle/pause", "", http.StatusOK},
		{"Resume", allow, "POST", "/jobs/settle/resume", "", http.StatusOK},
	} {
		h, err := schedhttp.New(s, schedhttp.Options{Authorizer: tc.auth})
		require.NoError(t, err)
		req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
		if tc.method == "POST" {
			req.Header.Set("Content-Type", "application/json")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, tc.want, rec.Code, "%s: %s", tc.name, rec.Body.String())
		if rec.Code >= 400 {
			require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"), tc.name)
		}
		if strings.HasSuffix(tc.name, "NeedsPartition") {
			require.Contains(t, rec.Body.String(), "partition is required for a partitioned job", tc.name)
		}
	}

	// What the accepted requests did to the ledger.
	ctx := context.Background()
	rec, found, err := ldg.Get(ctx, ledger.Slot{Job: "settle", At: slot, Partition: "eu"})
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, ledger.StatusPending, rec.Status)
	require.Equal(t, "retry: bank was down", rec.Reason)
	backfilled, err := ldg.List(ctx, "settle", "us", time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), 10)
	require.NoError(t, err)
	require.Len(t, backfilled, 3, "three daily slots in the range")
	st, err := ldg.State(ctx, "settle", "eu", time.Time{}, time.Now())
	require.NoError(t, err)
	require.False(t, st.Paused, "paused, then resumed")
}

func TestAdminHandlerAuthorizerSeesActionAndJob(t *testing.T) {
	t.Parallel()
	s, _ := newAdminScheduler(t)
	var got []string
	h, err := schedhttp.New(s, schedhttp.Options{Authorizer: func(r *http.Request, a schedhttp.Action, job string) error {
		got = append(got, string(a)+":"+job)
		if r.Header.Get("Authorization") != "Bearer ops" {
			return errors.New("who are you")
		}
		return nil
	}})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, postJSON("/jobs/settle/pause", nil))
	require.Equal(t, http.StatusForbidden, rec.Code)
	var problem map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &problem))
	require.Equal(t, "refused by the authorizer", problem["detail"], "the authorizer's reason is not sent")

	req := httptest.NewRequest("GET", "/jobs", nil)
	req.Header.Set("Authorization", "Bearer ops")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
	var page schedhttp.JobsPage
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &page))
	require.Len(t, page.Jobs, 1)
	require.Equal(t, []string{"eu", "us"}, page.Jobs[0].Partitions)
	require.Equal(t, []string{"pause:settle", "list:"}, got)
}

// An Authorizer error matching ErrUnauthenticated answers 401 with a
// Bearer challenge (RFC 6750, section 3); any other refusal stays 403.
func TestAdminHandlerAnswersUnauthenticatedWith401AndAChallenge(t *testing.T) {
	t.Parallel()
	s, _ := newAdminScheduler(t)
	h, err := schedhttp.New(s, schedhttp.Options{Authorizer: func(r *http.Request, a schedhttp.Action, _ string) error {
		switch {
		case r.Header.Get("Authorization") == "":
			return fmt.Errorf("no token: %w", schedhttp.ErrUnauthenticated)
		case a != schedhttp.ActionList:
			return schedhttp.ErrForbidden
		}
		return nil
	}})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/jobs", nil))
	require.Equal(t, http.StatusUnauthorized, rec.Code)
	require.Equal(t, "Bearer", rec.Header().Get("WWW-Authenticate"))
	require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
	require.NotContains(t, rec.Body.String(), "no token", "the authorizer's reason is not sent")

	req := postJSON("/jobs/settle/pause", nil)
	req.Header.Set("Authorization", "Bearer reader")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusForbidden, rec.Code, "authenticated, not allowed")
	require.Empty(t, rec.Header().Get("WWW-Authenticate"))
}

// Neither a 403 nor a 500 tells the client more than its status: the
// Authorizer's error and the backend's error text go to the log.
func TestAdminHandlerKeepsInternalErrorsInTheLog(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	leases, err := lease.New(redistest.Mini(t), lease.Options{})
	require.NoError(t, err)
	down := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	t.Cleanup(func() { _ = down.Close() })
	ldg, err := redisledger.New(down, redisledger.Options{})
	require.NoError(t, err)
	logger := slog.New(slog.NewJSONHandler(&logs, nil))
	s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ldg, Logger: logger})
	require.NoError(t, err)
	require.NoError(t, s.Register(scheduler.Job{Name: "settle", Spec: "0 2 * * *", Run: func(context.Context, scheduler.Run) error { return nil }}))
	h, err := schedhttp.New(s, schedhttp.Options{Logger: logger, Authorizer: func(r *http.Request, _ schedhttp.Action, _ string) error {
		if r.Header.Get("Authorization") == "" {
			return errors.New("token sig mismatch for kid=prod-7")
		}
		return nil
	}})
	require.NoError(t, err)

	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, postJSON("/jobs/settle/pause", nil))
	require.Equal(t, http.StatusForbidden, rec.Code)
	require.NotContains(t, rec.Body.String(), "kid=prod-7")

	req := httptest.NewRequest("GET", "/jobs/settle/runs", nil)
	req.Header.Set("Authorization", "Bearer ops")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusInternalServerError, rec.Code, rec.Body.String())
	var problem map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &problem))
	require.Equal(t, "internal error; see the server log", problem["detail"])
	require.NotContains(t, rec.Body.String(), "127.0.0.1:1")
	require.NotContains(t, rec.Body.String(), "refused")

	require.Contains(t, logs.String(), `"msg":"admin_request_forbidden"`)
	require.Contains(t, logs.String(), "kid=prod-7")
	require.Contains(t, logs.String(), `"msg":"admin_request_failed"`)
	require.Contains(t, logs.String(), "127.0.0.1:1")
}

func TestNewRefusesANilScheduler(t *testing.T) {
	t.Parallel()
	_, err := schedhttp.New(nil, schedhttp.Options{})
	require.ErrorIs(t, err, schedhttp.ErrInvalidOptions)
}

// A request for a slot outside the job's StartAt/EndAt is a bad request.
func TestAdminHandlerRefusesSlotsOutsideTheJobWindow(t *testing.T) {
	t.Parallel()
	s, _ := newAdminScheduler(t)
	require.NoError(t, s.Register(scheduler.Job{
		Name: "ended", Spec: "0 2 * * *", EndAt: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
		Run: func(context.Context, scheduler.Run) error { return nil },
	}))
	h, err := schedhttp.New(s, schedhttp.Options{Authorizer: func(*http.Request, schedhttp.Action, string) error { return nil }})
	require.NoError(t, err)
	for _, tc := range []struct{ path, body string }{
		{"/jobs/ended/trigger", `{}`},
		{"/jobs/ended/retry", `{"slot":"2026-11-29T02:00:00Z"}`},
		{"/jobs/ended/backfill", `{"from":"2026-11-20T00:00:00Z","to":"2026-11-23T00:00:00Z"}`},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, postJSON(tc.path, strings.NewReader(tc.body)))
		require.Equal(t, http.StatusBadRequest, rec.Code, "%s: %s", tc.path, rec.Body.String())
		require.Contains(t, rec.Body.String(), "2026-11-01T00:00:00Z)", "%s: the job's window named", tc.path)
	}
}
