package schedhttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/leasejoin"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/ledgertest"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

// apiNow is the fake clock's time in the API tests: half past ten.
var apiNow = time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)

func hour(h int) time.Time { return time.Date(2026, 12, 1, h, 0, 0, 0, time.UTC) }

// bigToken is beyond 2^53: a JSON number would lose it in JavaScript.
const bigToken fence.Token = 1<<60 + 1

// eachLedger runs fn on redisledger over the real Redis and on the
// in-memory ledgertest.Memory.
func eachLedger(t *testing.T, fn func(t *testing.T, ldg ledger.Ledger)) {
	t.Run("redisledger", func(t *testing.T) {
		t.Parallel()
		rdb := redistest.Real(t)
		ldg, err := redisledger.New(rdb, redisledger.Options{Prefix: redistest.Prefix(t, rdb)})
		require.NoError(t, err)
		fn(t, ldg)
	})
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		fn(t, ledgertest.NewMemory())
	})
}

// seeded returns an admin handler over a scheduler of the hourly job
// "settle" (partitions a and b) whose ledger holds, at 10:30:
//
//	a: 08:00 succeeded, 09:00 succeeded (started 250 ms late), 10:00 running
//	b: 08:00 succeeded, 09:00 failed "bank down", 10:00 failed twice, retry at 10:02
func seeded(t *testing.T, ldg ledger.Ledger, cfg schedhttp.Options) http.Handler {
	t.Helper()
	ctx := context.Background()
	leases, err := lease.New(redistest.Mini(t), lease.Options{})
	require.NoError(t, err)
	s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ldg, Clock: clock.NewFake(apiNow)})
	require.NoError(t, err)
	require.NoError(t, s.Register(scheduler.Job{Name: "settle", Spec: "0 * * * *", Partitions: []string{"a", "b"},
		Overlap: scheduler.OverlapBufferOne, Run: func(context.Context, scheduler.Run) error { return nil }}))
	fenceOf := func(p string) ledger.Fence {
		return ledger.Fence{Scope: ledger.UnitScope("settle", p), Token: bigToken, Owner: "secret-owner-" + p, Holder: "replica-" + p}
	}
	attempt := func(p string, h int, late time.Duration, o *ledger.Outcome) {
		t.Helper()
		slot := ledger.Slot{Job: "settle", At: hour(h), Partition: p}
		n, _, err := ldg.Begin(ctx, slot, fenceOf(p), 3, hour(h).Add(late))
		require.NoError(t, err)
		if o != nil {
			require.NoError(t, ldg.Finish(ctx, slot, fenceOf(p), n, *o, hour(h).Add(late+2*time.Second)))
		}
	}
	ok := &ledger.Outcome{Status: ledger.StatusSucceeded}
	failed := &ledger.Outcome{Status: ledger.StatusFailed, Error: "bank down", Class: ledger.ClassPermanent}
	retry := &ledger.Outcome{Status: ledger.StatusFailed, Error: "timeout", Class: ledger.ClassRetryable, RetryAt: hour(10).Add(time.Minute)}
	attempt("a", 8, 120*time.Millisecond, ok)
	attempt("b", 8, 100*time.Millisecond, ok)
	attempt("a", 9, 250*time.Millisecond, ok)
	attempt("b", 9, 300*time.Millisecond, failed)
	attempt("b", 10, 0, retry)
	attempt("b", 10, time.Minute, &ledger.Outcome{Status: ledger.StatusFailed, Error: "timeout again", Class: ledger.ClassRetryable,
		RetryAt: hour(10).Add(2 * time.Minute)})
	attempt("a", 10, 0, nil)
	if cfg.Authorizer == nil {
		cfg.Authorizer = func(*http.Request, schedhttp.Action, string) error { return nil }
	}
	h, err := schedhttp.New(s, cfg)
	require.NoError(t, err)
	return h
}

// get serves a GET and decodes its JSON answer into v (zeroed first: an
// omitted field must not keep an earlier answer's value), checking status.
func get(t *testing.T, h http.Handler, path string, status int, v any) string {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	require.Equal(t, status, rec.Code, "%s: %s", path, rec.Body.String())
	if v != nil {
		reflect.ValueOf(v).Elem().SetZero()
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), v))
	}
	return rec.Body.String()
}

func TestAdminAPIJobsCarryLedgerStatus(t *testing.T) {
	t.Parallel()
	eachLedger(t, func(t *testing.T, ldg ledger.Ledger) {
		h := seeded(t, ldg, schedhttp.Options{})
		body := get(t, h, "/jobs", http.StatusOK, nil)
		require.JSONEq(t, `{"jobs":[{"name":"settle","schedule":"0 * * * *","zone":"UTC","partitions":["a","b"],
			"overlap":"buffer_one","paused":false,"next_fire":"2026-12-01T11:00:00.000Z",
			"last_status":"running","last_slot":"2026-12-01T10:00:00.000Z",
			"last_success":"2026-12-01T09:00:00.000Z","lag_ms":250,
			"recent_skipped":0,"recent_failed":1,"recent_since":"2026-12-01T09:30:00.000Z"}]}`, body)

		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, postJSON("/jobs/settle/pause", nil))
		require.Equal(t, http.StatusOK, rec.Code)
		require.JSONEq(t, `{"job":"settle","paused":true}`, rec.Body.String())
		var page schedhttp.JobsPage
		get(t, h, "/jobs", http.StatusOK, &page)
		require.True(t, page.Jobs[0].Paused)
		rec = httptest.NewRecorder()
		h.ServeHTTP(rec, postJSON("/jobs/settle/resume", nil))
		require.JSONEq(t, `{"job":"settle","paused":false}`, rec.Body.String())
	})
}

func TestAdminAPIRunsMergePartitionsAndPage(t *testing.T) {
	t.Parallel()
	eachLedger(t, func(t *testing.T, ldg ledger.Ledger) {
		h := seeded(t, ldg, schedhttp.Options{})
		type row struct {
			slot      time.Time
			partition string
			status    string
		}
		rows := func(p schedhttp.RunsPage) []row {
			var out []row
			for _, r := range p.Runs {
				out = append(out, row{r.Slot.Time, r.Partition, r.Status})
			}
			return out
		}
		var pages [][]row
		path := "/jobs/settle/runs?limit=2"
		for range 5 {
			var page schedhttp.RunsPage
			get(t, h, path, http.StatusOK, &page)
			pages = append(pages, rows(page))
			if page.NextCursor == "" {
				break
			}
			path = "/jobs/settle/runs?limit=2&cursor=" + url.QueryEscape(page.NextCursor)
		}
		require.Equal(t, [][]row{
			{{hour(10), "a", "running"}, {hour(10), "b", "failed"}},
			{{hour(9), "a", "succeeded"}, {hour(9), "b", "failed"}},
			{{hour(8), "a", "succeeded"}, {hour(8), "b", "succeeded"}},
		}, pages, "every partition, newest first, three pages and no fourth")

		// Pages of every size, ending mid-slot or not, add up to the list.
		var all []row
		for _, p := range pages {
			all = append(all, p...)
		}
		for limit := 1; limit <= 7; limit++ {
			var walked []row
			cursor := ""
			for range 10 {
				var page schedhttp.RunsPage
				get(t, h, fmt.Sprintf("/jobs/settle/runs?limit=%d&cursor=%s", limit, url.QueryEscape(cursor)), http.StatusOK, &page)
				require.LessOrEqual(t, len(page.Runs), limit)
				walked = append(walked, rows(page)...)
				if cursor = page.NextCursor; cursor == "" {
					break
				}
			}
			require.Equal(t, all, walked, "pages of %d", limit)
		}

		var page schedhttp.RunsPage
		get(t, h, "/jobs/settle/runs?status=failed", http.StatusOK, &page)
		require.Equal(t, []row{{hour(10), "b", "failed"}, {hour(9), "b", "failed"}}, rows(page))
		require.Empty(t, page.NextCursor)
		get(t, h, "/jobs/settle/runs?status=failed&limit=1", http.StatusOK, &page)
		require.Equal(t, []row{{hour(10), "b", "failed"}}, rows(page))
		get(t, h, "/jobs/settle/runs?status=failed&limit=1&cursor="+url.QueryEscape(page.NextCursor), http.StatusOK, &page)
		require.Equal(t, []row{{hour(9), "b", "failed"}}, rows(page))
		require.Empty(t, page.NextCursor)
		get(t, h, "/jobs/settle/runs?partition=a&status=succeeded,running", http.StatusOK, &page)
		require.Equal(t, []row{{hour(10), "a", "running"}, {hour(9), "a", "succeeded"}, {hour(8), "a", "succeeded"}}, rows(page))
		get(t, h, "/jobs/settle/runs?from=2026-12-01T09:00:00Z&to=2026-12-01T10:00:00Z", http.StatusOK, &page)
		require.Equal(t, []row{{hour(9), "a", "succeeded"}, {hour(9), "b", "failed"}}, rows(page), "from inclusive, to exclusive")

		body := get(t, h, "/jobs/settle/runs?partition=b&limit=1", http.StatusOK, nil)
		require.Contains(t, body, `"next_cursor":"`)
		require.Contains(t, body, `"retry_at":"2026-12-01T10:02:00.000Z"`, "the second failure set a retry time")
		require.NotContains(t, body, `"reason"`, "empty strings are omitted")

		for _, bad := range []string{"status=done", "cursor=!!", "limit=1001", "from=yesterday", "partition=c"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/jobs/settle/runs?"+bad, nil))
			require.Contains(t, []int{http.StatusBadRequest, http.StatusNotFound}, rec.Code, bad)
			require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"), bad)
		}
		get(t, h, "/jobs/nope/runs", http.StatusNotFound, nil)
	})
}

func TestAdminAPIRunOfOneSlot(t *testing.T) {
	t.Parallel()
	eachLedger(t, func(t *testing.T, ldg ledger.Ledger) {
		h := seeded(t, ldg, schedhttp.Options{})
		body := get(t, h, "/jobs/settle/runs/2026-12-01T09:00:00Z?partition=b", http.StatusOK, nil)
		require.JSONEq(t, `{"job":"settle","partition":"b","slot":"2026-12-01T09:00:00.000Z","status":"failed","attempt":1,
			"attempts":[{"n":1,"token":"1152921504606846977","owner_id":"bca3702a2e67","holder":"replica-b","status":"failed",
			"error_class":"permanent","error":"bank down","started":"2026-12-01T09:00:00.300Z",
			"heartbeat":"2026-12-01T09:00:00.300Z",
			"finished":"2026-12-01T09:00:02.300Z"}]}`, body)
		var run schedhttp.RunJSON
		get(t, h, "/jobs/settle/runs/2026-12-01T10:00:00Z?partition=b", http.StatusOK, &run)
		require.Equal(t, 2, run.Attempt)
		require.Len(t, run.Attempts, 2)
		require.Equal(t, "timeout again", run.Attempts[1].Error)
		require.Equal(t, bigToken, run.Attempts[1].Token)

		get(t, h, "/jobs/settle/runs/2026-12-01T07:00:00Z?partition=b", http.StatusNotFound, nil)
		body = get(t, h, "/jobs/settle/runs/2026-12-01T09:00:00Z", http.StatusBadRequest, nil) // a partitioned job
		require.Contains(t, body, "partition is required for a partitioned job")
		get(t, h, "/jobs/settle/runs/2026-12-01T09:00:00Z?partition=", http.StatusNotFound, nil) // no partition "" in this job
		get(t, h, "/jobs/nope/runs/2026-12-01T09:00:00Z", http.StatusNotFound, nil)
		get(t, h, "/jobs/settle/runs/09:00?partition=b", http.StatusBadRequest, nil)
	})
}

func TestAdminAPIOperatorActionsAnswerSlots(t *testing.T) {
	t.Parallel()
	eachLedger(t, func(t *testing.T, ldg ledger.Ledger) {
		h := seeded(t, ldg, schedhttp.Options{})
		post := func(path, body string, status int) string {
			t.Helper()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, postJSON(path, strings.NewReader(body)))
			require.Equal(t, status, rec.Code, "%s: %s", path, rec.Body.String())
			return rec.Body.String()
		}
		require.JSONEq(t, `{"slot":{"job":"settle","partition":"b","slot":"2026-12-01T09:00:00.000Z"}}`,
			post("/jobs/settle/retry", `{"partition":"b","slot":"2026-12-01T09:00:00.400Z","reason":"bank is back"}`, http.StatusAccepted))
		var run schedhttp.RunJSON
		get(t, h, "/jobs/settle/runs/2026-12-01T09:00:00Z?partition=b", http.StatusOK, &run)
		require.Equal(t, "pending", run.Status)
		require.Equal(t, "retry: bank is back", run.Reason)
		require.JSONEq(t, `{"slot":{"job":"settle","partition":"a","slot":"2026-12-01T10:30:00.000Z"}}`,
			post("/jobs/settle/trigger", `{"partition":"a"}`, http.StatusAccepted))
		require.JSONEq(t, `{"slots":[{"job":"settle","partition":"a","slot":"2026-12-01T06:00:00.000Z"},
			{"job":"settle","partition":"a","slot":"2026-12-01T07:00:00.000Z"}]}`,
			post("/jobs/settle/backfill", `{"partition":"a","from":"2026-12-01T06:00:00Z","to":"2026-12-01T08:00:00Z"}`, http.StatusAccepted))
		post("/jobs/settle/retry", `{"partition":"a","slot":"2026-12-01T10:00:00Z"}`, http.StatusConflict)
	})
}

// fakeInspector answers List with its leases, filtered by a prefix glob.
type fakeInspector struct{ leases []leasedriver.Info }

func (f fakeInspector) Inspect(_ context.Context, name string) (leasedriver.Info, error) {
	for _, in := range f.leases {
		if in.Name == name {
			return in, nil
		}
	}
	return leasedriver.Info{Name: name}, nil
}

func (f fakeInspector) List(_ context.Context, match string, limit int) ([]leasedriver.Info, error) {
	var out []leasedriver.Info
	for _, in := range f.leases {
		if len(out) < limit && (match == "" || strings.HasPrefix(in.Name, strings.TrimSuffix(match, "*"))) {
			out = append(out, in)
		}
	}
	return out, nil
}

func TestAdminAPILeases(t *testing.T) {
	t.Parallel()
	ldg := ledgertest.NewMemory()
	get(t, seeded(t, ldg, schedhttp.Options{}), "/leases", http.StatusNotFound, nil)

	var asked []schedhttp.Action
	h := seeded(t, ledgertest.NewMemory(), schedhttp.Options{
		Leases: fakeInspector{leases: []leasedriver.Info{
			{Name: "settle|a", Held: true, OwnerID: "32dc2ef24a48", Holder: "replica-a", TTL: 1234 * time.Millisecond, Token: bigToken},
			{Name: "settle|b", Token: 7, Waiting: true},
		}},
		Authorizer: func(_ *http.Request, a schedhttp.Action, _ string) error { asked = append(asked, a); return nil },
	})
	require.JSONEq(t, `{"leases":[{"name":"settle|a","held":true,"owner_id":"32dc2ef24a48","holder":"replica-a","ttl_ms":1234,"token":"1152921504606846977","waiting":false},
		{"name":"settle|b","held":false,"token":"7","waiting":true}]}`, get(t, h, "/leases", http.StatusOK, nil))
	require.JSONEq(t, `{"leases":[{"name":"settle|a","held":true,"owner_id":"32dc2ef24a48","holder":"replica-a","ttl_ms":1234,"token":"1152921504606846977","waiting":false}]}`,
		get(t, h, "/leases?match=settle*&limit=1", http.StatusOK, nil))
	get(t, h, "/leases?limit=0", http.StatusBadRequest, nil)
	require.Contains(t, get(t, h, "/leases?match=%5B", http.StatusBadRequest, nil), "syntax error in pattern") // match=[
	require.Equal(t, []schedhttp.Action{schedhttp.ActionLeases, schedhttp.ActionLeases, schedhttp.ActionLeases, schedhttp.ActionLeases}, asked)
}

func TestConsoleAndOpenAPIAreServedWithoutTheAuthorizer(t *testing.T) {
	t.Parallel()
	h := seeded(t, ledgertest.NewMemory(), schedhttp.Options{
		Authorizer: func(*http.Request, schedhttp.Action, string) error { return schedhttp.ErrForbidden }})
	for path, ctype := range map[string]string{
		"/":                    "text/html; charset=utf-8",
		"/console/console.js":  "text/javascript; charset=utf-8",
		"/console/console.css": "text/css; charset=utf-8",
		"/openapi.json":        "application/json",
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		require.Equal(t, http.StatusOK, rec.Code, path)
		require.Equal(t, ctype, rec.Header().Get("Content-Type"), path)
		require.NotEmpty(t, rec.Body.Len(), path)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	require.Contains(t, rec.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'")
	require.Contains(t, rec.Body.String(), `src="console/console.js"`, "relative, so the handler mounts anywhere")
	for _, path := range []string{"/console/missing.js", "/console/..%2fopenapi.json", "/index.html"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		require.Equal(t, http.StatusNotFound, rec.Code, path)
	}
	get(t, h, "/jobs", http.StatusForbidden, nil)
}

// GET /leases over redislease.Backend on the real Redis: a held lease
// with its holder label, owner id, TTL and token (never its owner), a
// released one with its counter.
func TestAdminAPILeasesOnRedis(t *testing.T) {
	t.Parallel()
	rdb := redistest.Real(t)
	leases, err := lease.New(rdb, lease.Options{Prefix: redistest.Prefix(t, rdb), Holder: "replica-a"})
	require.NoError(t, err)
	inspector, ok := leasejoin.Backend(leases).(leasedriver.Inspector)
	require.True(t, ok)
	ctx := context.Background()
	held, err := leases.TryAcquire(ctx, "settle|a", 30*time.Second)
	require.NoError(t, err)
	defer func() { _ = held.Release(ctx) }()
	gone, err := leases.TryAcquire(ctx, "settle|b", 30*time.Second)
	require.NoError(t, err)
	require.NoError(t, gone.Release(ctx))

	h := seeded(t, ledgertest.NewMemory(), schedhttp.Options{Leases: inspector})
	var page schedhttp.LeasesPage
	get(t, h, "/leases?match=settle*", http.StatusOK, &page)
	require.Len(t, page.Leases, 2)
	a, b := page.Leases[0], page.Leases[1]
	require.Equal(t, "settle|a", a.Name)
	require.True(t, a.Held)
	require.Equal(t, fence.OwnerID(held.Holder().Owner), a.OwnerID)
	require.Equal(t, "replica-a", a.Holder)
	require.Equal(t, held.Token(), a.Token)
	require.InDelta(t, 30_000, a.TTLMS, 5_000, "ms left of the 30 s TTL")
	require.Equal(t, schedhttp.LeaseJSON{Name: "settle|b", Token: gone.Token()}, b, "released: the counter stays")
	body := get(t, h, "/leases?match=settle|a", http.StatusOK, nil)
	require.Contains(t, body, fmt.Sprintf(`"token":"%d"`, uint64(held.Token())))
	require.NotContains(t, body, held.Holder().Owner, "the owner is a write capability")
}

// The owner of an attempt is a write capability: no runs or attempts view
// carries it, only its owner_id and the holder label.
func TestAdminAPIRunsNeverShowTheOwner(t *testing.T) {
	t.Parallel()
	eachLedger(t, func(t *testing.T, ldg ledger.Ledger) {
		h := seeded(t, ldg, schedhttp.Options{})
		for _, path := range []string{
			"/jobs", "/jobs/settle/runs", "/jobs/settle/runs?partition=b",
			"/jobs/settle/runs/2026-12-01T09:00:00Z?partition=b", "/jobs/settle/runs/2026-12-01T10:00:00Z?partition=a",
		} {
			body := get(t, h, path, http.StatusOK, nil)
			require.NotContains(t, body, "secret-owner", path)
			if strings.Contains(path, "runs") {
				require.Contains(t, body, `"holder":"replica-`, path)
				require.Regexp(t, `"owner_id":"[0-9a-f]{12}"`, body, path)
			}
		}
	})
}

// A job whose window ended (EndAt passed on the scheduler's clock) says so:
// end_at and ended in GET /jobs; a job whose EndAt is still to come has
// end_at and no ended.
func TestAdminAPIJobsSayWhenTheWindowEnded(t *testing.T) {
	t.Parallel()
	leases, err := lease.New(redistest.Mini(t), lease.Options{})
	require.NoError(t, err)
	s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ledgertest.NewMemory(), Clock: clock.NewFake(apiNow)})
	require.NoError(t, err)
	run := func(context.Context, scheduler.Run) error { return nil }
	require.NoError(t, s.Register(scheduler.Job{Name: "old", Spec: "0 * * * *", EndAt: apiNow.Add(-time.Hour), Run: run}))
	require.NoError(t, s.Register(scheduler.Job{Name: "soon", Spec: "0 * * * *", EndAt: apiNow.Add(time.Hour), Run: run}))
	h, err := schedhttp.New(s, schedhttp.Options{Authorizer: func(*http.Request, schedhttp.Action, string) error { return nil }})
	require.NoError(t, err)
	var page schedhttp.JobsPage
	get(t, h, "/jobs", http.StatusOK, &page)
	require.Len(t, page.Jobs, 2)
	require.Equal(t, "old", page.Jobs[0].Name)
	require.True(t, page.Jobs[0].Ended)
	require.True(t, page.Jobs[0].EndAt.Equal(apiNow.Add(-time.Hour)))
	require.True(t, page.Jobs[0].NextFire.IsZero(), "no fire after the window")
	require.False(t, page.Jobs[1].Ended)
	require.True(t, page.Jobs[1].EndAt.Equal(apiNow.Add(time.Hour)))
}
