package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

// fakeRuns is an admin handler that serves 5 runs of "settle" in pages of
// 2 and records the queries it was sent.
type fakeRuns struct {
	mu      sync.Mutex
	queries []string
}

func (f *fakeRuns) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.queries = append(f.queries, r.URL.RawQuery)
	f.mu.Unlock()
	if r.Header.Get("Authorization") != "Bearer "+testToken || r.URL.Path != "/admin/jobs/settle/runs" {
		http.Error(w, "no", http.StatusForbidden)
		return
	}
	start, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	var page schedhttp.RunsPage
	for i := start; i < 5 && len(page.Runs) < min(limit, 2); i++ {
		slot := time.Date(2026, 11, 30-i, 1, 0, 0, 0, time.UTC)
		page.Runs = append(page.Runs, schedhttp.RunJSON{Job: "settle", Partition: "eu", Slot: schedhttp.Time{Time: slot}, Status: "succeeded", Attempt: 1})
	}
	if next := start + len(page.Runs); next < 5 {
		page.NextCursor = strconv.Itoa(next)
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(page)
}

func (f *fakeRuns) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.queries...)
}

// runs follows next_cursor until --limit, sends --partition only when
// given (” is the default partition, absent is all), and the token as
// Bearer.
func TestRunsFollowsCursorsAndSendsPartitionOnlyWhenGiven(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		args  []string
		runs  int
		query []string
	}{
		{"AllPartitionsAllPages", nil, 5, []string{"limit=100", "cursor=2&limit=98", "cursor=4&limit=96"}},
		{"LimitStopsPaging", []string{"--limit", "3"}, 3, []string{"limit=3", "cursor=2&limit=1"}},
		{"DefaultPartition", []string{"--partition", "", "--limit", "1"}, 1, []string{"limit=1&partition="}},
		{"OnePartition", []string{"--partition", "eu", "--status", "failed", "--limit", "1"}, 1, []string{"limit=1&partition=eu&status=failed"}},
		{"Window", []string{"--from", "2026-11-01T00:00:00+01:00", "--limit", "1"}, 1, []string{"from=2026-10-31T23%3A00%3A00Z&limit=1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fake := &fakeRuns{}
			srv := httptest.NewServer(fake)
			t.Cleanup(srv.Close)
			var page schedhttp.RunsPage
			args := append([]string{"job", "runs", "settle", "--admin", srv.URL + "/admin/", "--token", testToken}, tc.args...)
			okJSON(t, &page, args...)
			require.Len(t, page.Runs, tc.runs)
			for i, r := range page.Runs {
				require.Equal(t, time.Date(2026, 11, 30-i, 1, 0, 0, 0, time.UTC), r.Slot.Time.UTC())
			}
			require.Equal(t, tc.query, fake.sent())
		})
	}
}

// A problem body's detail is what the error says; the status picks the
// exit code.
func TestProblemExitCodes(t *testing.T) {
	t.Parallel()
	for status, code := range map[int]int{400: exitUsage, 401: exitRefused, 403: exitRefused, 404: exitNotFound, 409: exitRefused, 500: exitError, 502: exitError} {
		t.Run(strconv.Itoa(status), func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/problem+json")
				w.WriteHeader(status)
				fmt.Fprintf(w, `{"type":"about:blank","title":%q,"status":%d,"detail":"the detail"}`, http.StatusText(status), status)
			}))
			t.Cleanup(srv.Close)
			r := cli(t, "job", "pause", "settle", "--admin", srv.URL)
			require.Equal(t, code, r.code, r.stderr)
			require.True(t, strings.HasSuffix(strings.TrimSpace(r.stderr), ": the detail"), r.stderr)
		})
	}
}

// watch reports a failed poll (a 500: the service restarting) and polls
// again.
func TestWatchPollsAgainAfterAServerError(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		switch {
		case first:
			http.Error(w, "restarting", http.StatusInternalServerError)
		case strings.HasSuffix(r.URL.Path, "/runs"):
			slot := schedhttp.Time{Time: time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)}
			_ = json.NewEncoder(w).Encode(schedhttp.RunsPage{Runs: []schedhttp.RunJSON{{Job: "settle", Partition: "eu", Slot: slot, Status: "succeeded", Attempt: 1}}})
		default: // GET /leases
			_ = json.NewEncoder(w).Encode(schedhttp.LeasesPage{Leases: []schedhttp.LeaseJSON{}})
		}
	}))
	t.Cleanup(srv.Close)
	var out lockedBuffer
	stop := start(t, &out, "job", "watch", "settle", "--interval", "10ms", "--admin", srv.URL)
	testwait.Until(t, 10*time.Second, "the run after the failed poll", func() bool {
		return strings.Contains(out.String(), "succeeded")
	})
	r := stop()
	require.Equal(t, exitOK, r.code)
	require.Contains(t, r.stderr, "500 Internal Server Error: restarting (polling again)")
	require.Regexp(t, `(?m)^\d\d:\d\d:\d\d  run    eu  2026-11-30T01:00:00Z  succeeded  attempt 1  token -  holder -$`, r.stdout)
}
