package schedhttp_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

// postJSON is an admin action as the console and the CLI send it.
func postJSON(path string, body io.Reader) *http.Request {
	req := httptest.NewRequest("POST", path, body)
	req.Header.Set("Content-Type", "application/json")
	return req
}

// Issue 32, 4: with a session-cookie authorizer, a page on another site
// paused (200) and triggered (202) a job with text/plain POSTs. Actions
// are refused before the Authorizer when they come from another origin
// (403) or are not declared JSON (415).
func TestAdminActionsRefuseCrossOriginAndNonJSON(t *testing.T) {
	t.Parallel()
	s, _ := newAdminScheduler(t)
	var authorized atomic.Int64
	// A session-cookie authorizer: the browser sends the cookie on its
	// own, whichever page makes the request.
	cookie := func(r *http.Request, _ schedhttp.Action, _ string) error {
		authorized.Add(1)
		if c, err := r.Cookie("session"); err != nil || c.Value != "operator" {
			return schedhttp.ErrUnauthenticated
		}
		return nil
	}
	h, err := schedhttp.New(s, schedhttp.Options{Authorizer: cookie, TrustedOrigins: []string{"https://ops.example.com"}})
	require.NoError(t, err)

	actions := map[string]string{
		"pause":    `{}`,
		"resume":   ``,
		"trigger":  `{"partition":"eu","reason":"x"}`,
		"retry":    `{"partition":"eu","slot":"2026-11-29T01:00:00Z"}`,
		"backfill": `{"partition":"eu","from":"2026-11-20T00:00:00Z","to":"2026-11-21T00:00:00Z"}`,
	}
	for _, tc := range []struct {
		name        string
		contentType string
		origin      string
		fetchSite   string
		want        int // for every action; 0: the action's success
	}{
		// The reported requests.
		{"CrossSiteTextPlain", "text/plain", "https://evil.example", "", http.StatusForbidden},
		{"CrossSiteTextPlainFromABrowser", "text/plain", "https://evil.example", "cross-site", http.StatusForbidden},
		{"CrossSiteJSON", "application/json", "https://evil.example", "", http.StatusForbidden},
		{"CrossSiteForm", "application/x-www-form-urlencoded", "https://evil.example", "cross-site", http.StatusForbidden},
		{"SecFetchSiteCrossSiteWithoutOrigin", "application/json", "", "cross-site", http.StatusForbidden},
		{"SecFetchSiteSameSite", "application/json", "https://other.admin.local", "same-site", http.StatusForbidden},
		{"OriginOtherPort", "application/json", "http://admin.local:8081", "", http.StatusForbidden},
		{"OriginOtherHost", "application/json", "http://evil.local:8080", "", http.StatusForbidden},
		{"OriginNull", "application/json", "null", "", http.StatusForbidden},
		// Same origin and non-browser clients, declared JSON.
		{"SameOriginBrowser", "application/json", "http://admin.local:8080", "same-origin", 0},
		{"SameOriginWithoutSecFetchSite", "application/json", "http://admin.local:8080", "", 0},
		{"UserTyped", "application/json", "", "none", 0},
		{"NotABrowser", "application/json", "", "", 0},
		{"JSONWithCharset", "application/json; charset=utf-8", "", "", 0},
		{"TrustedOrigin", "application/json", "https://ops.example.com", "cross-site", 0},
		// Not declared JSON, whatever the origin.
		{"SameOriginTextPlain", "text/plain", "http://admin.local:8080", "same-origin", http.StatusUnsupportedMediaType},
		{"SameOriginForm", "application/x-www-form-urlencoded", "", "", http.StatusUnsupportedMediaType},
		{"NoContentType", "", "", "", http.StatusUnsupportedMediaType},
		{"JSONLookalike", "application/jsonx", "", "", http.StatusUnsupportedMediaType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for action, body := range actions {
				before := authorized.Load()
				req := httptest.NewRequest("POST", "http://admin.local:8080/jobs/settle/"+action, strings.NewReader(body))
				req.AddCookie(&http.Cookie{Name: "session", Value: "operator"})
				if tc.contentType != "" {
					req.Header.Set("Content-Type", tc.contentType)
				}
				if tc.origin != "" {
					req.Header.Set("Origin", tc.origin)
				}
				if tc.fetchSite != "" {
					req.Header.Set("Sec-Fetch-Site", tc.fetchSite)
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if tc.want == 0 {
					// Past the guards: a second trigger within the same
					// second is the scheduler's 400 (ErrTriggerTaken).
					taken := action == "trigger" && rec.Code == http.StatusBadRequest && strings.Contains(rec.Body.String(), "trigger second is taken")
					require.True(t, rec.Code < 300 || taken, "%s: %d %s", action, rec.Code, rec.Body.String())
					require.Equal(t, before+1, authorized.Load())
					continue
				}
				require.Equal(t, tc.want, rec.Code, "%s: %s", action, rec.Body.String())
				require.Equal(t, "application/problem+json", rec.Header().Get("Content-Type"))
				var p schedhttp.Problem
				require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
				require.Equal(t, tc.want, p.Status)
				require.Equal(t, before, authorized.Load(), "%s: refused before the Authorizer", action)
			}
		})
	}
	// Reads change nothing and are not checked: another origin's page
	// cannot read them anyway (no CORS header is sent).
	req := httptest.NewRequest("GET", "http://admin.local:8080/jobs", nil)
	req.AddCookie(&http.Cookie{Name: "session", Value: "operator"})
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Empty(t, rec.Header().Get("Access-Control-Allow-Origin"))

	for _, bad := range []string{"ops.example.com", "https://ops.example.com/path", "://x"} {
		_, err := schedhttp.New(s, schedhttp.Options{TrustedOrigins: []string{bad}})
		require.ErrorIs(t, err, schedhttp.ErrInvalidOptions, bad)
	}
}
