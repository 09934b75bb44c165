package schedhttp_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

// Issue 37, 6: every problem names its type under ProblemBase (was
// about:blank), a 400 about one field names it, a body over
// MaxBodyBytes is a 413 whatever its Content-Type, and a detail repeats
// at most a short cut of the input it quotes.
func TestAdminProblemsNameTypeAndField(t *testing.T) {
	t.Parallel()
	s, _ := newAdminScheduler(t)
	allow := func(*http.Request, schedhttp.Action, string) error { return nil }
	long := strings.Repeat("y", 10<<10)
	for _, tc := range []struct {
		name, method, path, ctype, body string
		status                          int
		kind, field                     string
	}{
		{"UnknownJob", "POST", "/jobs/nope/pause", "application/json", "", 404, "unknown-job", ""},
		// The scheduler's error text quotes the whole name (a 5000-byte
		// job name came back in a 515-byte detail: a fresh user's trial).
		{"UnknownLongJob", "POST", "/jobs/" + long + "/pause", "application/json", "", 404, "unknown-job", ""},
		{"UnknownLongJobRuns", "GET", "/jobs/" + long + "/runs", "", "", 404, "unknown-job", ""},
		{"UnknownLongPartition", "POST", "/jobs/settle/trigger", "application/json", `{"partition":"` + long + `"}`, 404, "unknown-job", ""},
		{"NeedsPartition", "POST", "/jobs/settle/trigger", "application/json", `{}`, 400, "partition-required", "partition"},
		{"NeedsSlot", "POST", "/jobs/settle/retry", "application/json", `{"partition":"eu"}`, 400, "invalid-request", "slot"},
		{"BadSlot", "POST", "/jobs/settle/retry", "application/json", `{"partition":"eu","slot":"tomorrow"}`, 400, "invalid-request", "slot"},
		{"SlotOfWrongType", "POST", "/jobs/settle/retry", "application/json", `{"partition":"eu","slot":7}`, 400, "invalid-request", "slot"},
		{"UnknownField", "POST", "/jobs/settle/retry", "application/json", `{"slott":"x"}`, 400, "invalid-request", "slott"},
		{"NotAnObject", "POST", "/jobs/settle/retry", "application/json", `[1]`, 400, "invalid-request", ""},
		// A member given twice: encoding/json kept the last, so the retry
		// ran another slot than a reader of the body saw first (a fresh
		// user's trial).
		{"SlotGivenTwice", "POST", "/jobs/settle/retry", "application/json", `{"slot":"2026-11-29T01:00:00Z","partition":"eu","slot":"2026-11-30T01:00:00Z"}`, 400, "invalid-request", "slot"},
		{"PartitionGivenTwice", "POST", "/jobs/settle/trigger", "application/json", `{"partition":"eu","partition":"us"}`, 400, "invalid-request", "partition"},
		{"BackfillRange", "POST", "/jobs/settle/backfill", "application/json", `{"partition":"eu","from":"2026-11-20T00:00:00Z"}`, 400, "invalid-request", "to"},
		{"BackfillNoFrom", "POST", "/jobs/settle/backfill", "application/json", `{"partition":"eu","to":"2026-11-20T00:00:00Z"}`, 400, "invalid-request", "from"},
		{"BackfillFromNull", "POST", "/jobs/settle/backfill", "application/json", `{"partition":"eu","from":null,"to":"2026-11-20T00:00:00Z"}`, 400, "invalid-request", "from"},
		{"BackfillToBeforeYear1From", "POST", "/jobs/settle/backfill", "application/json", `{"partition":"eu","from":"0001-01-01T00:00:01Z","to":"0001-01-01T00:00:00Z"}`, 400, "invalid-request", "to"},
		{"NotASlot", "POST", "/jobs/settle/retry", "application/json", `{"partition":"eu","slot":"2026-11-29T01:30:00Z"}`, 400, "invalid-argument", ""},
		{"BadLimit", "GET", "/jobs/settle/runs?limit=0", "", "", 400, "invalid-request", "limit"},
		{"BadFrom", "GET", "/jobs/settle/runs?from=" + long, "", "", 400, "invalid-request", "from"},
		{"BadStatus", "GET", "/jobs/settle/runs?status=" + long, "", "", 400, "invalid-request", "status"},
		{"ResumeSkipNotBool", "POST", "/jobs/settle/resume", "application/json", `{"skip_paused":"yes"}`, 400, "invalid-request", "skip_paused"},
		{"NoLeases", "GET", "/leases", "", "", 404, "no-lease-inspector", ""},
		{"NotJSON", "POST", "/jobs/settle/pause", "text/plain", "", 415, "unsupported-media-type", ""},
		{"OversizedJSON", "POST", "/jobs/settle/trigger", "application/json", `{"reason":"` + strings.Repeat("x", 70<<10) + `"}`, 413, "body-too-large", ""},
		{"OversizedText", "POST", "/jobs/settle/trigger", "text/plain", strings.Repeat("x", 70<<10), 413, "body-too-large", ""},
		{"OversizedForm", "POST", "/jobs/settle/pause", "application/x-www-form-urlencoded", "a=" + strings.Repeat("x", 70<<10), 413, "body-too-large", ""},
	} {
		h, err := schedhttp.New(s, schedhttp.Options{Authorizer: allow})
		require.NoError(t, err)
		req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
		if tc.ctype != "" {
			req.Header.Set("Content-Type", tc.ctype)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, tc.status, rec.Code, "%s: %s", tc.name, rec.Body.String())
		var p schedhttp.Problem
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p), tc.name)
		require.Equal(t, schedhttp.ProblemBase+tc.kind, p.Type, "%s: %s", tc.name, rec.Body.String())
		require.Equal(t, tc.status, p.Status, tc.name)
		require.Equal(t, tc.field, p.Field, "%s: %s", tc.name, rec.Body.String())
		require.Less(t, len(p.Detail), 200, "%s: the detail quotes a short cut of the input: %s", tc.name, p.Detail)
		require.NotContains(t, p.Detail, strings.Repeat("y", 65), "%s: at most 64 bytes of an input", tc.name)
	}
}

// A body of unknown length (chunked) over MaxBodyBytes is a 413 too, also
// when it is not declared JSON.
func TestAdminProblemChunkedOversizedBody(t *testing.T) {
	t.Parallel()
	s, _ := newAdminScheduler(t)
	h, err := schedhttp.New(s, schedhttp.Options{Authorizer: func(*http.Request, schedhttp.Action, string) error { return nil },
		MaxBodyBytes: 100})
	require.NoError(t, err)
	for _, ctype := range []string{"text/plain", "application/json"} {
		req := httptest.NewRequest("POST", "/jobs/settle/pause", struct{ *strings.Reader }{strings.NewReader(strings.Repeat(" ", 101))})
		req.ContentLength = -1
		req.Header.Set("Content-Type", ctype)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code, ctype)
		// Up to the bound, the body read to measure it is read again.
		req = httptest.NewRequest("POST", "/jobs/settle/pause", struct{ *strings.Reader }{strings.NewReader(strings.Repeat(" ", 98) + "{}")})
		req.ContentLength = -1
		req.Header.Set("Content-Type", "application/json")
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	}
}

// newAdminPoster returns an admin scheduler and a function that POSTs a
// JSON body to its operations API (every action allowed) and returns the
// answer's status and body.
func newAdminPoster(t *testing.T) (*scheduler.Scheduler, func(path, body string) (int, string)) {
	t.Helper()
	s, _ := newAdminScheduler(t)
	h, err := schedhttp.New(s, schedhttp.Options{Authorizer: func(*http.Request, schedhttp.Action, string) error { return nil }})
	require.NoError(t, err)
	return s, func(path, body string) (int, string) {
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
}

// A backfill from the year 1 (the zero time.Time, 0001-01-01T00:00:00Z)
// is a present from, not a missing one: it is not answered "to: want
// from < to", and a retry of that slot is not "slot: required".
func TestAdminBackfillFromTheYearOne(t *testing.T) {
	t.Parallel()
	_, post := newAdminPoster(t)
	code, body := post("/jobs/settle/backfill", `{"partition":"eu","from":"0001-01-01T00:00:00Z","to":"0001-01-03T00:00:00Z"}`)
	require.NotContains(t, body, "want from < to")
	require.Equal(t, http.StatusAccepted, code, body)
	var got schedhttp.SlotsResponse
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	require.Len(t, got.Slots, 2, "the 02:00 Berlin slots of 1 and 2 January of the year 1: %s", body)
	code, body = post("/jobs/settle/retry", `{"partition":"eu","slot":"0001-01-01T00:00:00Z"}`)
	require.NotContains(t, body, "required")
	require.Equal(t, http.StatusBadRequest, code, body)
	require.Contains(t, body, "invalid-argument", "not a slot of the schedule: %s", body)
}

// Pause takes no body or {} (schedhttp.New): null, trailing data after
// the {}, or a second value are refused with 400 and the job is not
// paused; resume refuses null too. {} and an empty body still pause.
func TestAdminPauseRefusesNullAndTrailingData(t *testing.T) {
	t.Parallel()
	s, post := newAdminPoster(t)
	for _, body := range []string{`{} {"x":1}`, `null`, `{}{}`, `{} x`, ` null `} {
		code, answer := post("/jobs/settle/pause", body)
		require.Equal(t, http.StatusBadRequest, code, "pause %q: %s", body, answer)
		require.Contains(t, answer, "invalid-request", "pause %q", body)
		st, err := s.JobStatus(t.Context(), "settle")
		require.NoError(t, err)
		require.False(t, st.Paused, "a refused pause %q pauses nothing", body)
	}
	code, answer := post("/jobs/settle/resume", `null`)
	require.Equal(t, http.StatusBadRequest, code, "resume null: %s", answer)
	for _, body := range []string{`{}`, ``, ` {} `} {
		code, answer := post("/jobs/settle/pause", body)
		require.Equal(t, http.StatusOK, code, "pause %q: %s", body, answer)
	}
}

// A trigger on a paused job answers 202 with "paused": true: the run is
// recorded and waits for resume. Not paused, the field is left out.
func TestAdminTriggerOnAPausedJobSaysSo(t *testing.T) {
	t.Parallel()
	_, post := newAdminPoster(t)
	code, body := post("/jobs/settle/trigger", `{"partition":"eu"}`)
	require.Equal(t, http.StatusAccepted, code, body)
	require.NotContains(t, body, "paused")
	code, body = post("/jobs/settle/pause", `{}`)
	require.Equal(t, http.StatusOK, code, body)
	code, body = post("/jobs/settle/trigger", `{"partition":"us"}`)
	require.Equal(t, http.StatusAccepted, code, body)
	var got schedhttp.SlotResponse
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	require.True(t, got.Paused, "the answer says the run waits: %s", body)
	require.Equal(t, "us", got.Slot.Partition)
}

// A retry and a backfill of a paused job answer "paused": true as a
// trigger does: the slots are recorded and wait for resume (they said
// nothing: an operator saw 202 and no run). Not paused, the field is left
// out.
func TestAdminRetryAndBackfillOfAPausedJobSaySo(t *testing.T) {
	t.Parallel()
	_, post := newAdminPoster(t)
	// settle runs at 02:00 Berlin: 01:00 UTC in winter.
	code, body := post("/jobs/settle/backfill", `{"partition":"us","from":"2026-12-03T01:00:00Z","to":"2026-12-03T01:00:01Z"}`)
	require.Equal(t, http.StatusAccepted, code, body)
	require.NotContains(t, body, "paused")

	code, body = post("/jobs/settle/pause", `{}`)
	require.Equal(t, http.StatusOK, code, body)
	code, body = post("/jobs/settle/retry", `{"partition":"eu","slot":"2026-12-01T01:00:00Z"}`)
	require.Equal(t, http.StatusAccepted, code, body)
	var got schedhttp.SlotResponse
	require.NoError(t, json.Unmarshal([]byte(body), &got))
	require.True(t, got.Paused, "the retry's answer says it waits: %s", body)
	require.Equal(t, "2026-12-01T01:00:00Z", got.Slot.Slot.UTC().Format(time.RFC3339))

	code, body = post("/jobs/settle/backfill", `{"partition":"eu","from":"2026-12-02T01:00:00Z","to":"2026-12-02T01:00:01Z"}`)
	require.Equal(t, http.StatusAccepted, code, body)
	var slots schedhttp.SlotsResponse
	require.NoError(t, json.Unmarshal([]byte(body), &slots))
	require.True(t, slots.Paused, "the backfill's answer says it waits: %s", body)
	require.Len(t, slots.Slots, 1, body)
}
