package httpfence_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/httpfencetest"
	"github.com/holdfast-go/holdfast/sinks/httpfence/problem"
)

// call is one request in a middleware test. Header values are sent raw;
// "" leaves the header out.
type call struct {
	method, path, body string
	key, token, owner  string
	scope              string // the raw Fencing-Scope value
	tenant             string
}

// answerOf is a response as the client saw it, without the Date field.
type answerOf struct {
	status int
	header http.Header
	body   []byte
}

// fixture is a test server: the middleware with one backend's stores in
// front of a handler that counts its runs and can be held in flight.
type fixture struct {
	srv     *httptest.Server
	runs    atomic.Int64
	entered chan struct{} // a held handler has started
	release chan struct{} // closing it lets held handlers finish
	once    sync.Once
}

// newFixture serves the middleware over s. Paths under /hold block until
// release is closed; /fail answers 500 on its first run; /big answers
// 2 KiB; everything else answers 201 with the run number and the body.
// wrap, when given, goes in front of the middleware.
func newFixture(t *testing.T, s stores, tweak func(*httpfence.Options), wrap ...func(http.Handler) http.Handler) *fixture {
	t.Helper()
	f := &fixture{entered: make(chan struct{}, 64), release: make(chan struct{})}
	cfg := httpfence.Options{
		Store:        s.store,
		Fence:        s.fence,
		Identity:     func(r *http.Request) string { return r.Header.Get("X-Tenant") },
		MaxBodyBytes: 1024,
	}
	if tweak != nil {
		tweak(&cfg)
	}
	mw, err := httpfence.Middleware(cfg)
	require.NoError(t, err)
	var failed atomic.Bool
	var h http.Handler = mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := f.runs.Add(1)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("handler: read body: %v", err)
		}
		if strings.HasPrefix(r.URL.Path, "/hold") {
			f.entered <- struct{}{}
			<-f.release
		}
		if r.URL.Path == "/fail" && !failed.Swap(true) {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		holder, _ := fence.HolderFromContext(r.Context())
		tok, owner := holder.Token, holder.Owner
		w.Header().Set("Content-Type", "application/json")
		w.Header().Add("Set-Cookie", "a=1")
		w.Header().Add("Set-Cookie", "b=2")
		w.Header().Set("Location", "/payments/"+fmt.Sprint(n))
		w.WriteHeader(http.StatusCreated)
		if r.URL.Path == "/big" {
			_, _ = w.Write([]byte(strings.Repeat("x", 2048)))
			return
		}
		_, _ = fmt.Fprintf(w, `{"run":%d,"body":%q,"token":%d,"owner":%q}`, n, body, tok, owner)
	}))
	for _, w := range wrap {
		h = w(h)
	}
	f.srv = httptest.NewServer(h)
	t.Cleanup(func() {
		f.unblock()
		f.srv.Close()
	})
	return f
}

func (f *fixture) unblock() { f.once.Do(func() { close(f.release) }) }

func (f *fixture) do(t *testing.T, c call) answerOf {
	t.Helper()
	if c.method == "" {
		c.method = http.MethodPost
	}
	req, err := http.NewRequest(c.method, f.srv.URL+c.path, strings.NewReader(c.body))
	require.NoError(t, err)
	for k, v := range map[string]string{"Idempotency-Key": c.key, "Fencing-Token": c.token, "Fencing-Owner": c.owner, "Fencing-Scope": c.scope, "X-Tenant": c.tenant} {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := f.srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	resp.Header.Del("Date")
	return answerOf{resp.StatusCode, resp.Header, body}
}

func problemOf(t *testing.T, a answerOf) problem.Details {
	t.Helper()
	require.Equal(t, "application/problem+json", a.header.Get("Content-Type"), "body %s", a.body)
	var p problem.Details
	require.NoError(t, json.Unmarshal(a.body, &p))
	require.Equal(t, a.status, p.Status)
	return p
}

const problems = "https://holdfast.dev/problems/"

// TestStatusCodes is the middleware's status table, on every backend.
func TestStatusCodes(t *testing.T) {
	t.Parallel()
	ok := call{path: "/pay", body: `{"amount":1}`, key: `"k1"`, token: "10", owner: `"a"`}
	with := func(c call, edit func(*call)) call { edit(&c); return c }

	for _, tc := range []struct {
		name     string
		before   []call // sent first, each must succeed (201)
		held     *call  // sent first and kept in flight
		req      call
		status   int
		problem  string // the type's name, when a problem is expected
		runs     int64  // handler runs, all calls included
		replayOf int    // 1-based index in before whose answer req must equal
	}{
		{name: "FirstRequestRunsTheHandler", req: ok, status: 201, runs: 1},
		{name: "MissingKey", req: with(ok, func(c *call) { c.key = "" }), status: 400, problem: "missing-idempotency-key"},
		{name: "KeyNotAnSfString", req: with(ok, func(c *call) { c.key = "k1" }), status: 400, problem: "invalid-idempotency-key"},
		{name: "KeyWithParameters", req: with(ok, func(c *call) { c.key = `"k1";x=1` }), status: 400, problem: "invalid-idempotency-key"},
		{name: "EmptyKey", req: with(ok, func(c *call) { c.key = `""` }), status: 400, problem: "invalid-idempotency-key"},
		{name: "MalformedToken", req: with(ok, func(c *call) { c.token = "010" }), status: 400, problem: "invalid-fencing-token"},
		{name: "TokenZero", req: with(ok, func(c *call) { c.token = "0" }), status: 400, problem: "invalid-fencing-token"},
		{name: "TokenWithoutOwner", req: with(ok, func(c *call) { c.owner = "" }), status: 400, problem: "invalid-fencing-token"},
		{name: "NoTokenWhileFenced", req: with(ok, func(c *call) { c.token, c.owner = "", "" }), status: 400, problem: "invalid-fencing-token"},
		{name: "BodyTooLarge", req: with(ok, func(c *call) { c.body = strings.Repeat("x", 1025) }), status: 413, problem: "request-too-large"},
		{name: "SameKeyInFlight", held: &call{path: "/hold", key: `"k1"`, token: "10", owner: `"a"`}, req: call{path: "/hold", key: `"k1"`, token: "10", owner: `"a"`}, status: 409, problem: "request-in-flight", runs: 1},
		{name: "SameKeyOtherBodyInFlight", held: &call{path: "/hold", key: `"k1"`, token: "10", owner: `"a"`}, req: call{path: "/hold", body: "other", key: `"k1"`, token: "10", owner: `"a"`}, status: 422, problem: "idempotency-key-reused", runs: 1},
		{name: "SameKeyOtherBody", before: []call{ok}, req: with(ok, func(c *call) { c.body = `{"amount":2}` }), status: 422, problem: "idempotency-key-reused", runs: 1},
		{name: "SameKeyOtherPath", before: []call{ok}, req: with(ok, func(c *call) { c.path = "/pay/2" }), status: 422, problem: "idempotency-key-reused", runs: 1},
		{name: "SameKeyOtherQuery", before: []call{ok}, req: with(ok, func(c *call) { c.path = "/pay?x=1" }), status: 422, problem: "idempotency-key-reused", runs: 1},
		{name: "SameKeyOtherMethod", before: []call{ok}, req: with(ok, func(c *call) { c.method = http.MethodPut }), status: 422, problem: "idempotency-key-reused", runs: 1},
		{name: "CompletedKeyReplays", before: []call{ok}, req: ok, status: 201, runs: 1, replayOf: 1},
		{name: "ReplayIgnoresTheToken", before: []call{ok}, req: with(ok, func(c *call) { c.token, c.owner = "11", `"b"` }), status: 201, runs: 1, replayOf: 1},
		{
			name:   "ReplayWinsOverTheFence",
			before: []call{ok, with(ok, func(c *call) { c.key, c.token, c.owner = `"k2"`, "20", `"b"` })},
			req:    ok, status: 201, runs: 2, replayOf: 1,
		},
		{
			name:   "StaleTokenOnNewKey",
			before: []call{with(ok, func(c *call) { c.key, c.token = `"k0"`, "11" })},
			req:    ok, status: 412, problem: "stale-fencing-token", runs: 1,
		},
		{
			name:   "EqualTokenOtherOwner",
			before: []call{with(ok, func(c *call) { c.key, c.owner = `"k0"`, `"b"` })},
			req:    ok, status: 412, problem: "stale-fencing-token", runs: 1,
		},
		{
			name:   "EqualTokenSameOwner",
			before: []call{with(ok, func(c *call) { c.key = `"k0"` })},
			req:    ok, status: 201, runs: 2,
		},
		{name: "ServerErrorIsNotStored", before: nil, req: with(ok, func(c *call) { c.path = "/fail" }), status: 500, runs: 1},
		{
			name:   "OtherScopeIsNotStale",
			before: []call{with(ok, func(c *call) { c.key, c.token, c.scope = `"k0"`, "99", `"lease-b"` })},
			req:    ok, status: 201, runs: 2,
		},
		{
			name:   "StaleTokenOfTheSameScope",
			before: []call{with(ok, func(c *call) { c.key, c.token, c.scope = `"k0"`, "11", `"lease-a"` })},
			req:    with(ok, func(c *call) { c.scope = `"lease-a"` }), status: 412, problem: "stale-fencing-token", runs: 1,
		},
		{
			name:   "NoScopeHeaderIsTheEmptyScope",
			before: []call{with(ok, func(c *call) { c.key, c.token, c.scope = `"k0"`, "11", `""` })},
			req:    ok, status: 412, problem: "stale-fencing-token", runs: 1,
		},
		{name: "InvalidScope", req: with(ok, func(c *call) { c.scope = "bare" }), status: 400, problem: "invalid-fencing-token"},
		{name: "ImplausibleToken", req: with(ok, func(c *call) { c.token = "18446744073709551615" }), status: 400, problem: "implausible-fencing-token"},
		{
			name:   "TenantsDoNotShareFences",
			before: []call{with(ok, func(c *call) { c.key, c.token, c.tenant = `"k0"`, "99", "acme" })},
			req:    with(ok, func(c *call) { c.tenant = "globex" }), status: 201, runs: 2,
		},
		{
			name:   "ReplayRaisesTheFence",
			before: []call{ok, with(ok, func(c *call) { c.token, c.owner = "11", `"b"` })},
			req:    with(ok, func(c *call) { c.key = `"k2"` }), status: 412, problem: "stale-fencing-token", runs: 1,
		},
		{name: "TenantsDoNotShareKeys", before: []call{with(ok, func(c *call) { c.tenant = "acme" })}, req: with(ok, func(c *call) { c.tenant = "globex" }), status: 201, runs: 2},
		{name: "GetPassesThrough", req: call{method: http.MethodGet, path: "/pay"}, status: 201, runs: 1},
		// A method in Methods but for its case is guarded too: a handler
		// that does not check the method serves "post" as POST (a fresh
		// user's trial: it went through unkeyed and unfenced).
		{name: "LowerCaseMethodNeedsAKey", req: with(ok, func(c *call) { c.method, c.key = "post", "" }), status: 400, problem: "missing-idempotency-key"},
		{
			name:   "LowerCaseMethodIsFenced",
			before: []call{with(ok, func(c *call) { c.key, c.token = `"k0"`, "99" })},
			req:    with(ok, func(c *call) { c.method = "pOsT" }), status: 412, problem: "stale-fencing-token", runs: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			eachBackend(t, func(t *testing.T, s stores) {
				f := newFixture(t, s, nil)
				var before []answerOf
				for i, c := range tc.before {
					a := f.do(t, c)
					require.Equal(t, http.StatusCreated, a.status, "before[%d]: %s", i, a.body)
					before = append(before, a)
				}
				var wg sync.WaitGroup
				if tc.held != nil {
					wg.Go(func() {
						if a := f.do(t, *tc.held); a.status != http.StatusCreated {
							t.Errorf("held request: %d %s", a.status, a.body)
						}
					})
					<-f.entered
				}

				got := f.do(t, tc.req)
				f.unblock()
				wg.Wait()

				require.Equal(t, tc.status, got.status, "body %s", got.body)
				require.Equal(t, tc.runs, f.runs.Load(), "handler runs")
				if tc.problem != "" {
					p := problemOf(t, got)
					require.Equal(t, problems+tc.problem, p.Type)
				}
				if tc.replayOf > 0 {
					require.Equal(t, before[tc.replayOf-1], got, "a replay is the stored answer, byte for byte")
				}
			})
		})
	}
}

// TestInFlightAnswerSaysWhenTheLockEnds: a key in flight is answered 409
// with Retry-After set to the lock's remaining time in whole seconds,
// rounded up, on every backend, fenced (Postgres: BeginFenced) and not.
func TestInFlightAnswerSaysWhenTheLockEnds(t *testing.T) {
	t.Parallel()
	for _, fenced := range []bool{true, false} {
		t.Run(fmt.Sprintf("fenced=%v", fenced), func(t *testing.T) {
			t.Parallel()
			eachBackend(t, func(t *testing.T, s stores) {
				f := newFixture(t, s, func(o *httpfence.Options) {
					o.LockTTL = 90 * time.Second
					if !fenced {
						o.Fence = nil
					}
				})
				held := call{path: "/hold", key: `"k1"`, token: "10", owner: `"a"`}
				var wg sync.WaitGroup
				wg.Go(func() {
					if a := f.do(t, held); a.status != http.StatusCreated {
						t.Errorf("held request: %d %s", a.status, a.body)
					}
				})
				<-f.entered
				got := f.do(t, held)
				f.unblock()
				wg.Wait()
				require.Equal(t, http.StatusConflict, got.status, "body %s", got.body)
				require.Equal(t, problems+"request-in-flight", problemOf(t, got).Type)
				// 89.x s left of the 90 s lock: 90, rounded up.
				require.Equal(t, "90", got.header.Get("Retry-After"))
			})
		})
	}
}

func TestStaleTokenProblemNamesBothTokens(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s stores) {
		f := newFixture(t, s, nil)
		require.Equal(t, 201, f.do(t, call{path: "/settle", key: `"new"`, token: "1001", owner: `"b"`}).status)
		got := f.do(t, call{path: "/settle", key: `"old"`, token: "1000", owner: `"a"`})
		p := problemOf(t, got)
		require.Equal(t, problem.Details{
			Type: problems + "stale-fencing-token", Title: "Stale fencing token", Status: 412,
			Detail: p.Detail, Resource: "/settle", CurrentToken: 1001, PresentedToken: 1000,
		}, p)
		require.EqualValues(t, 1, f.runs.Load())

		// The refused key was released: the old key with a fresh token runs.
		got = f.do(t, call{path: "/settle", key: `"old"`, token: "1002", owner: `"c"`})
		require.Equal(t, 201, got.status, "%s", got.body)
		require.EqualValues(t, 2, f.runs.Load())
	})
}

// TestReplayRaisesTheFence is the sequence of issue 11 part 2: token 7
// completes K1; token 8 retries K1 and is replayed, and the fence is now 8;
// token 7 with a new key K2 is refused with 412 and its handler never runs
// (a second effect otherwise).
func TestReplayRaisesTheFence(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s stores) {
		f := newFixture(t, s, nil)
		first := f.do(t, call{path: "/charges", body: "c1", key: `"K1"`, token: "7", owner: `"old"`})
		require.Equal(t, 201, first.status, "%s", first.body)

		replayed := f.do(t, call{path: "/charges", body: "c1", key: `"K1"`, token: "8", owner: `"new"`})
		require.Equal(t, first, replayed, "token 8 on K1 is a replay")
		require.EqualValues(t, 1, f.runs.Load(), "a replay does not run the handler")

		late := f.do(t, call{path: "/charges", body: "c2", key: `"K2"`, token: "7", owner: `"old"`})
		require.Equal(t, 412, late.status, "K2 with token 7 after the replay of token 8: %s (handler runs %d)", late.body, f.runs.Load())
		p := problemOf(t, late)
		require.Equal(t, problems+"stale-fencing-token", p.Type)
		require.Equal(t, fence.Token(8), p.CurrentToken, "the replay raised the fence to 8")
		require.Equal(t, fence.Token(7), p.PresentedToken)
		require.EqualValues(t, 1, f.runs.Load(), "the stale holder's new key did not run the handler")
		t.Logf("%T: K1/7 -> %d, K1/8 -> %d (replay), K2/7 -> %d current=%d, handler runs %d",
			s.fence, first.status, replayed.status, late.status, p.CurrentToken, f.runs.Load())

		// A replay presenting a token the fence is already past is still
		// answered: the refusal is for the raise, not for the replay.
		again := f.do(t, call{path: "/charges", body: "c1", key: `"K1"`, token: "7", owner: `"old"`})
		require.Equal(t, first, again)
	})
}

// A client can no longer fence a resource for everyone for ever with the
// largest token: tokens carry a time floor (µs), so one far ahead of the
// server's clock is refused; -1 turns the ceiling off.
func TestTokenCeiling(t *testing.T) {
	t.Parallel()
	// Near the real clock skew, not a day (issue 32): the forged token of
	// the issue, 23 h ahead, is refused by default.
	now := time.Date(2026, 12, 1, 19, 0, 0, 0, time.UTC)
	healthy := strconv.FormatInt(now.UnixMicro(), 10)
	limit := strconv.FormatInt(now.Add(docMaxTokenAhead).UnixMicro(), 10)
	beyond := strconv.FormatInt(now.Add(docMaxTokenAhead).UnixMicro()+1, 10)
	s := stores{store: httpfencetest.NewMemoryStore(), fence: httpfencetest.NewMemoryFence()}
	f := newFixture(t, s, func(c *httpfence.Options) { c.Now = func() time.Time { return now } })
	require.Equal(t, 201, f.do(t, call{path: "/a", key: `"k1"`, token: healthy, owner: `"a"`}).status)
	require.Equal(t, 201, f.do(t, call{path: "/b", key: `"k2"`, token: limit, owner: `"a"`}).status, "at the ceiling")
	dayAhead := strconv.FormatInt(now.Add(23*time.Hour).UnixMicro(), 10)
	for _, tok := range []string{beyond, dayAhead, "18446744073709551615"} {
		got := f.do(t, call{path: "/a", key: `"k3"`, token: tok, owner: `"a"`})
		p := problemOf(t, got)
		require.Equal(t, 400, got.status)
		require.Equal(t, problems+"implausible-fencing-token", p.Type)
		require.Contains(t, p.Detail, "more than MaxTokenAhead (5m0s) ahead")
		require.NotContains(t, p.Detail, strconv.FormatInt(now.UnixMicro(), 10), "not the server's clock")
	}
	// The refused token raised nothing: a healthy token still passes.
	require.Equal(t, 201, f.do(t, call{path: "/a", key: `"k4"`, token: healthy, owner: `"a"`}).status)
	require.EqualValues(t, 3, f.runs.Load())

	off := newFixture(t, stores{store: httpfencetest.NewMemoryStore(), fence: httpfencetest.NewMemoryFence()}, func(c *httpfence.Options) {
		c.Now = func() time.Time { return now }
		c.MaxTokenAhead = -1
	})
	require.Equal(t, 201, off.do(t, call{path: "/a", key: `"k1"`, token: "18446744073709551615", owner: `"a"`}).status, "ceiling off")
}

func TestHandlerSeesTokenAndBody(t *testing.T) {
	t.Parallel()
	f := newFixture(t, stores{store: httpfencetest.NewMemoryStore(), fence: httpfencetest.NewMemoryFence()}, nil)
	got := f.do(t, call{path: "/p", body: "hello", key: `"k"`, token: "42", owner: `"own\"er"`})
	require.Equal(t, 201, got.status)
	require.JSONEq(t, `{"run":1,"body":"hello","token":42,"owner":"own\"er"}`, string(got.body))
}

func TestServerErrorReleasesTheKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t, stores{store: httpfencetest.NewMemoryStore()}, nil)
	c := call{path: "/fail", key: `"k"`}
	require.Equal(t, 500, f.do(t, c).status)
	first := f.do(t, c)
	require.Equal(t, 201, first.status, "the retry ran the handler")
	require.Equal(t, first, f.do(t, c), "and its answer is stored")
	require.EqualValues(t, 2, f.runs.Load())
}

func TestPanickingHandlerReleasesTheKey(t *testing.T) {
	t.Parallel()
	store := httpfencetest.NewMemoryStore()
	mw, err := httpfence.Middleware(httpfence.Options{Store: store})
	require.NoError(t, err)
	var runs atomic.Int64
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			panic(http.ErrAbortHandler)
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	req := func() *http.Request {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("x"))
		r.Header.Set("Idempotency-Key", `"k"`)
		return r
	}
	require.PanicsWithValue(t, http.ErrAbortHandler, func() { h.ServeHTTP(httptest.NewRecorder(), req()) })
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req())
	require.Equal(t, http.StatusAccepted, rec.Code)
	require.EqualValues(t, 2, runs.Load())
}

func TestOversizedResponseIsNotRetainedButNotRerun(t *testing.T) {
	t.Parallel()
	f := newFixture(t, stores{store: httpfencetest.NewMemoryStore()}, func(c *httpfence.Options) { c.MaxResponseBytes = 1024 })
	c := call{path: "/big", key: `"k"`}
	first := f.do(t, c)
	require.Equal(t, 201, first.status)
	require.Len(t, first.body, 2048, "the client gets the whole response")
	again := f.do(t, c)
	require.Equal(t, problems+"response-not-retained", problemOf(t, again).Type)
	require.Equal(t, http.StatusGone, again.status)
	require.EqualValues(t, 1, f.runs.Load())
}

func TestUnfencedMiddlewarePassesTokensThrough(t *testing.T) {
	t.Parallel()
	f := newFixture(t, stores{store: httpfencetest.NewMemoryStore()}, nil)
	require.Equal(t, 201, f.do(t, call{path: "/p", key: `"k1"`}).status, "no token needed without a Fence")
	got := f.do(t, call{path: "/p", key: `"k2"`, token: "5", owner: `"a"`})
	require.JSONEq(t, `{"run":2,"body":"","token":5,"owner":"a"}`, string(got.body))
	require.Equal(t, 400, f.do(t, call{path: "/p", key: `"k3"`, token: "x", owner: `"a"`}).status, "but a malformed one is refused")
}

func TestMiddlewareConfigValidation(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]httpfence.Options{
		"NoStore":          {},
		"NegativeBody":     {Store: httpfencetest.NewMemoryStore(), MaxBodyBytes: -2},
		"NegativeResponse": {Store: httpfencetest.NewMemoryStore(), MaxResponseBytes: -5},
		"TinyTTL":          {Store: httpfencetest.NewMemoryStore(), TTL: 1},
		"NegativeLockTTL":  {Store: httpfencetest.NewMemoryStore(), LockTTL: -1},
	} {
		_, err := httpfence.Middleware(cfg)
		require.ErrorIs(t, err, httpfence.ErrInvalidOptions, name)
	}
	_, err := httpfence.Middleware(httpfence.Options{Store: httpfencetest.NewMemoryStore(), MaxBodyBytes: -1, MaxResponseBytes: -1})
	require.NoError(t, err, "-1 means no limit")
}

func TestDefaultStorable(t *testing.T) {
	t.Parallel()
	for status, want := range map[int]bool{200: true, 201: true, 204: true, 302: true, 400: true, 404: true, 422: true,
		408: false, 409: false, 412: false, 425: false, 429: false, 500: false, 502: false, 503: false} {
		require.Equal(t, want, httpfence.DefaultStorable(status), "status %d", status)
	}
}

// The stale_token_rejected event names the presented owner by its
// fence.OwnerID only: an owner is a write capability and never goes to a
// log.
func TestStaleTokenLogNamesTheOwnerID(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s stores) {
		logger, logged := jsonLog()
		f := newFixture(t, s, func(o *httpfence.Options) { o.Logger = logger })
		require.Equal(t, 201, f.do(t, call{path: "/settle", key: `"new"`, token: "1001", owner: `"holder-b-0123456789"`}).status)
		require.Equal(t, 412, f.do(t, call{path: "/settle", key: `"old"`, token: "1000", owner: `"holder-a-0123456789"`}).status)
		logs := logged()
		require.Contains(t, logs, `"msg":"stale_token_rejected"`)
		require.Contains(t, logs, `"owner_id":"`+fence.OwnerID("holder-a-0123456789")+`"`)
		require.NotContains(t, logs, "holder-a-0123456789")
	})
}

// jsonLog returns a JSON logger safe for concurrent use and a function
// that returns what it logged so far.
func jsonLog() (*slog.Logger, func() string) {
	var buf bytes.Buffer
	var mu sync.Mutex
	logger := slog.New(slog.NewJSONHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), nil))
	return logger, func() string {
		mu.Lock()
		defer mu.Unlock()
		return buf.String()
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
