package browsertest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

// seen is one request the admin handler answered.
type seen struct {
	method, path, origin, fetchSite, contentType string
	cookie                                       bool
	status                                       int
}

// Issue 32, 4: a page on another origin made the browser POST admin
// actions, carrying the operator's session cookie, and a cookie
// authorizer accepted them. In Chromium: the same fetches from the admin
// handler's own origin are accepted (the control), from a page of another
// origin (another port of the same host, so the browser sends the cookie)
// they are refused, and the job stays unpaused.
func TestCrossOriginActionIsRefusedInTheBrowser(t *testing.T) {
	rdb := redistest.Real(t)
	prefix := redistest.Prefix(t, rdb)
	leases, err := lease.New(rdb, lease.Options{Prefix: prefix + "lease:"})
	require.NoError(t, err)
	ldg, err := redisledger.New(rdb, redisledger.Options{Prefix: prefix + "ledger:"})
	require.NoError(t, err)
	sched, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ldg})
	require.NoError(t, err)
	require.NoError(t, sched.Register(scheduler.Job{Name: "settle", Spec: "0 0 0 1 1 *",
		Run: func(context.Context, scheduler.Run) error { return nil }}))
	admin, err := schedhttp.New(sched, schedhttp.Options{
		// A session-cookie authorizer: the credential a browser sends on
		// its own, whichever page asks.
		Authorizer: func(r *http.Request, _ schedhttp.Action, _ string) error {
			if c, err := r.Cookie("session"); err != nil || c.Value != "operator" {
				return schedhttp.ErrUnauthenticated
			}
			return nil
		}})
	require.NoError(t, err)

	var mu sync.Mutex
	var log []seen
	mux := http.NewServeMux()
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "session", Value: "operator", Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
		fmt.Fprint(w, "<!doctype html><title>logged in</title>")
	})
	mux.Handle("/admin/", http.StripPrefix("/admin", admin))
	adminSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		mux.ServeHTTP(rec, r)
		_, cookieErr := r.Cookie("session")
		mu.Lock()
		log = append(log, seen{r.Method, r.URL.Path, r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site"),
			r.Header.Get("Content-Type"), cookieErr == nil, rec.status})
		mu.Unlock()
	}))
	t.Cleanup(adminSrv.Close)
	evilSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "<!doctype html><title>evil</title>")
	}))
	t.Cleanup(evilSrv.Close)
	posts := func(path string) []seen {
		mu.Lock()
		defer mu.Unlock()
		var out []seen
		for _, s := range log {
			if s.method == "POST" && strings.HasSuffix(s.path, path) {
				out = append(out, s)
			}
		}
		return out
	}

	ctx, stop := browser(t)
	defer stop()
	// fetchFrom runs a fetch of the admin handler in the page at pageURL
	// and returns what the script saw ("status N", "opaque" or the error).
	fetchFrom := func(pageURL, action, mode, contentType string) string {
		t.Helper()
		script := fmt.Sprintf(`fetch(%q, {method: "POST", mode: %q, credentials: "include",
			headers: {"Content-Type": %q}, body: "{}"}).then(
			r => r.type === "opaque" ? "opaque" : "status " + r.status, e => "error " + e.name)`,
			adminSrv.URL+"/admin/jobs/settle/"+action, mode, contentType)
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		require.NoError(t, chromedp.Do(sctx, chromedp.Navigate(pageURL)))
		out, err := chromedp.Run(sctx, chromedp.Evaluate[string](script, chromedp.EvalAwaitPromise))
		require.NoError(t, err)
		return out
	}

	// The operator logs in: the browser holds the session cookie of the
	// admin host (127.0.0.1, any port: cookies know no ports).
	_, err = chromedp.Run(ctx, chromedp.Navigate(adminSrv.URL+"/login"))
	require.NoError(t, err)

	// From another origin: a "simple" text/plain POST (no preflight; the
	// reply is opaque to the page) reaches the handler with the cookie
	// and is refused; a JSON POST is preflighted, and the handler answers
	// no CORS preflight, so the browser never sends it.
	require.Equal(t, "opaque", fetchFrom(evilSrv.URL+"/", "pause", "no-cors", "text/plain"))
	require.Equal(t, "error TypeError", fetchFrom(evilSrv.URL+"/", "trigger", "cors", "application/json"))
	testwait.Until(t, 10*time.Second, "the cross-origin pause reached the handler", func() bool { return len(posts("/pause")) == 1 })
	got := posts("/pause")[0]
	require.True(t, got.cookie, "the browser sent the session cookie: only the origin check stands in the way")
	require.Equal(t, evilSrv.URL, got.origin)
	require.Equal(t, "same-site", got.fetchSite, "another port of the same host")
	require.Equal(t, http.StatusForbidden, got.status)
	require.Empty(t, posts("/trigger"), "the preflight failed: no POST was sent")
	st, err := sched.JobStatus(context.Background(), "settle")
	require.NoError(t, err)
	require.False(t, st.Paused, "the cross-origin pause paused nothing")

	// The control: the same pause from the admin handler's own origin,
	// declared JSON, is accepted.
	require.Equal(t, "status 200", fetchFrom(adminSrv.URL+"/login", "pause", "same-origin", "application/json"))
	st, err = sched.JobStatus(context.Background(), "settle")
	require.NoError(t, err)
	require.True(t, st.Paused, "the same-origin pause is accepted")
	last := posts("/pause")[1]
	require.Equal(t, "same-origin", last.fetchSite)
	require.Equal(t, http.StatusOK, last.status)
	// ... and declared text/plain from its own origin, refused (415).
	require.Equal(t, "status 415", fetchFrom(adminSrv.URL+"/login", "resume", "same-origin", "text/plain"))
}

// statusWriter records the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}
