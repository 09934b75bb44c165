package httpfence_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/httpfencetest"
	"github.com/holdfast-go/holdfast/sinks/httpfence/problem"
)

var (
	keyOld   = httpfence.Key{ID: "k-2026-11", Secret: bytes.Repeat([]byte{0x11}, 32)}
	keyNew   = httpfence.Key{ID: "k-2026-12", Secret: bytes.Repeat([]byte{0x22}, 32)}
	keyRogue = httpfence.Key{ID: "k-2026-12", Secret: bytes.Repeat([]byte{0x33}, 32)} // the right kid, the wrong secret
)

func testSigner(t testing.TB) *httpfence.Signer { return signerOf(t, keyNew) }

func signerOf(t testing.TB, k httpfence.Key) *httpfence.Signer {
	t.Helper()
	s, err := httpfence.NewSigner(k)
	require.NoError(t, err)
	return s
}

func testVerifier(t testing.TB, keys ...httpfence.Key) *httpfence.Verifier {
	t.Helper()
	if len(keys) == 0 {
		keys = []httpfence.Key{keyNew}
	}
	v, err := httpfence.NewVerifier(keys...)
	require.NoError(t, err)
	return v
}

// captured records the requests a Transport sends, answering 201.
type captured struct {
	mu   sync.Mutex
	reqs []*http.Request
	body [][]byte
}

func (c *captured) RoundTrip(r *http.Request) (*http.Response, error) {
	var b []byte
	if r.Body != nil {
		b, _ = io.ReadAll(r.Body)
		_ = r.Body.Close()
	}
	c.mu.Lock()
	c.reqs, c.body = append(c.reqs, r), append(c.body, b)
	c.mu.Unlock()
	return &http.Response{StatusCode: http.StatusCreated, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
}

// signedHeaders returns the headers a Transport with signer sends for a
// POST of body to path, with key and h.
func signedHeaders(t *testing.T, signer *httpfence.Signer, now time.Time, path, body, key string, h fence.Holder) http.Header {
	t.Helper()
	c := &captured{}
	client := &http.Client{Transport: &httpfence.Transport{Base: c, Signer: signer, Now: func() time.Time { return now }}}
	ctx := httpfence.WithIdempotencyKey(fence.WithHolder(context.Background(), h), key)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://sink.test"+path, strings.NewReader(body))
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Len(t, c.reqs, 1)
	require.Equal(t, body, string(c.body[0]), "the body still reaches the server")
	return c.reqs[0].Header.Clone()
}

// sigServer is a middleware with a Verifier over memory stores, with a
// fixed clock, counting handler runs and recording log events.
type sigServer struct {
	mw    http.Handler
	runs  int
	fence *httpfencetest.MemoryFence
	logs  *bytes.Buffer
}

func newSigServer(t *testing.T, now time.Time, v *httpfence.Verifier) *sigServer {
	t.Helper()
	s := &sigServer{fence: httpfencetest.NewMemoryFence(), logs: &bytes.Buffer{}}
	mw, err := httpfence.Middleware(httpfence.Options{
		Store: httpfencetest.NewMemoryStore(), Fence: s.fence, Verifier: v,
		Now:    func() time.Time { return now },
		Logger: slog.New(slog.NewJSONHandler(s.logs, nil)),
	})
	require.NoError(t, err)
	s.mw = mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.runs++
		w.WriteHeader(http.StatusCreated)
	}))
	return s
}

func (s *sigServer) do(method, path, body string, h http.Header) (int, problem.Details) {
	r := httptest.NewRequest(method, "http://sink.test"+path, strings.NewReader(body))
	r.Header = h.Clone()
	w := httptest.NewRecorder()
	s.mw.ServeHTTP(w, r)
	var p problem.Details
	_ = json.Unmarshal(w.Body.Bytes(), &p)
	return w.Code, p
}

// Every part of a signed request is covered: changing any of them, or
// signing with a key the server does not list, is refused with 403 before
// the fence is touched; the untouched request is admitted, and a request
// with a lower token afterwards shows that no refused one raised the fence.
func TestSignatureCoversEveryFencingField(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 22, 0, 0, 0, time.UTC)
	base := now.UnixMicro()
	h := fence.Holder{Scope: "push", Token: fence.Token(base), Owner: "holder-a"}
	good := signedHeaders(t, testSigner(t), now, "/v1/payouts", `{"n":1}`, "x1", h)
	require.NotEmpty(t, good.Get(httpfence.SignatureHeader))

	ahead := strconv.FormatInt(base+60_000_000, 10) // 1 min ahead: plausible
	set := func(k, v string) func(http.Header) { return func(h http.Header) { h.Set(k, v) } }
	cases := []struct {
		name         string
		method, path string
		body         string
		edit         func(http.Header)
		status       int
		typ          string
	}{
		{name: "TokenRaised", edit: set("Fencing-Token", ahead), status: 403},
		{name: "ScopeChanged", edit: set("Fencing-Scope", `"pull"`), status: 403},
		{name: "ScopeDropped", edit: func(h http.Header) { h.Del("Fencing-Scope") }, status: 403},
		{name: "OwnerChanged", edit: set("Fencing-Owner", `"evil"`), status: 403},
		{name: "KeyChanged", edit: set("Idempotency-Key", `"x2"`), status: 403},
		{name: "BodyChanged", body: `{"n":2}`, status: 403},
		{name: "PathChanged", path: "/v1/refunds", status: 403},
		{name: "MethodChanged", method: http.MethodPut, status: 403},
		{name: "TimeChanged", edit: func(h http.Header) {
			h.Set(httpfence.SignatureHeader, strings.Replace(h.Get(httpfence.SignatureHeader), strconv.FormatInt(now.Unix(), 10), strconv.FormatInt(now.Unix()+1, 10), 1))
		}, status: 403},
		{name: "UnknownKeyID", edit: func(h http.Header) {
			h.Set(httpfence.SignatureHeader, strings.Replace(h.Get(httpfence.SignatureHeader), keyNew.ID, "k-other", 1))
		}, status: 403},
		{name: "WrongSecret", edit: func(h http.Header) {
			h.Set(httpfence.SignatureHeader, signedHeaders(t, signerOf(t, keyRogue), now, "/v1/payouts", `{"n":1}`, "x1", h2(h)).Get(httpfence.SignatureHeader))
		}, status: 403},
		{name: "Missing", edit: func(h http.Header) { h.Del(httpfence.SignatureHeader) }, status: 403},
		{name: "Malformed", edit: set(httpfence.SignatureHeader, `kid="k-2026-12", t=1, sig=:AAAA:`), status: 400, typ: "invalid-fencing-signature"},
		{name: "Repeated", edit: func(h http.Header) { h.Add(httpfence.SignatureHeader, h.Get(httpfence.SignatureHeader)) }, status: 400, typ: "invalid-fencing-signature"},
	}
	s := newSigServer(t, now, testVerifier(t))
	for _, c := range cases {
		hd := good.Clone()
		if c.edit != nil {
			c.edit(hd)
		}
		method, path, body := http.MethodPost, "/v1/payouts", `{"n":1}`
		if c.method != "" {
			method = c.method
		}
		if c.path != "" {
			path = c.path
		}
		if c.body != "" {
			body = c.body
		}
		status, p := s.do(method, path, body, hd)
		require.Equal(t, c.status, status, c.name)
		typ := c.typ
		if typ == "" {
			typ = "fencing-signature-rejected"
		}
		require.Equal(t, problems+typ, p.Type, c.name)
	}
	require.Zero(t, s.runs, "no refused request reached the handler")
	require.Contains(t, s.logs.String(), `"msg":"fencing_signature_rejected"`)
	require.NotContains(t, s.logs.String(), "holder-a", "the owner is never logged")
	require.NotContains(t, s.logs.String(), "evil", "the owner is never logged")

	// The untouched request is admitted; nothing refused moved the fence:
	// a request with token base-1 from another holder is refused only
	// because of the admitted one (current = base), not a forged one.
	status, _ := s.do(http.MethodPost, "/v1/payouts", `{"n":1}`, good)
	require.Equal(t, http.StatusCreated, status)
	lower := signedHeaders(t, testSigner(t), now, "/v1/payouts", `{}`, "x3", fence.Holder{Scope: "push", Token: h.Token - 1, Owner: "holder-0"})
	status, p := s.do(http.MethodPost, "/v1/payouts", `{}`, lower)
	require.Equal(t, http.StatusPreconditionFailed, status)
	require.Equal(t, h.Token, p.CurrentToken)
	require.Equal(t, 1, s.runs)
}

// h2 reads the holder back from signed headers.
func h2(h http.Header) fence.Holder {
	holder, _, _ := httpfence.ParseFencing(h)
	return holder
}

// A signature is good for MaxSignatureAge either way of the server's clock.
func TestSignatureAge(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 22, 0, 0, 0, time.UTC)
	h := fence.Holder{Scope: "push", Token: fence.Token(now.UnixMicro()), Owner: "a"}
	for _, c := range []struct {
		signedAt time.Time
		status   int
	}{
		{now.Add(-docMaxSignatureAge), 201},
		{now.Add(-docMaxSignatureAge - time.Second), 403},
		{now.Add(docMaxSignatureAge), 201},
		{now.Add(docMaxSignatureAge + time.Second), 403},
	} {
		s := newSigServer(t, now, testVerifier(t))
		status, _ := s.do(http.MethodPost, "/p", "", signedHeaders(t, testSigner(t), c.signedAt, "/p", "", "k", h))
		require.Equal(t, c.status, status, "signed at %v", c.signedAt)
	}
}

// Rotation: while the Verifier lists both keys, signers on either are
// admitted; once the old key is dropped, its signatures are refused.
func TestSignatureKeyRotation(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 22, 0, 0, 0, time.UTC)
	h := fence.Holder{Scope: "push", Token: fence.Token(now.UnixMicro()), Owner: "a"}
	both := newSigServer(t, now, testVerifier(t, keyOld, keyNew))
	st, _ := both.do(http.MethodPost, "/p", "", signedHeaders(t, signerOf(t, keyOld), now, "/p", "", "k1", h))
	require.Equal(t, 201, st, "old key, still listed")
	st, _ = both.do(http.MethodPost, "/p", "", signedHeaders(t, signerOf(t, keyNew), now, "/p", "", "k2", h))
	require.Equal(t, 201, st, "new key")

	newOnly := newSigServer(t, now, testVerifier(t, keyNew))
	st, p := newOnly.do(http.MethodPost, "/p", "", signedHeaders(t, signerOf(t, keyOld), now, "/p", "", "k1", h))
	require.Equal(t, 403, st, "old key, dropped")
	require.Equal(t, "unknown key id", p.Detail)
}

// The safe default: a Fence with no Verifier, no Identity and no explicit
// opt-in is refused at construction; without a Fence, fencing headers
// from an unauthenticated caller are refused rather than handed to the
// handler, and requests without them pass.
func TestUnauthenticatedFencingIsAnExplicitOptIn(t *testing.T) {
	t.Parallel()
	_, err := httpfence.Middleware(httpfence.Options{Store: httpfencetest.NewMemoryStore(), Fence: httpfencetest.NewMemoryFence()})
	require.ErrorIs(t, err, httpfence.ErrInvalidOptions)
	require.Contains(t, err.Error(), "Verifier")
	_, err = httpfence.Middleware(httpfence.Options{Store: httpfencetest.NewMemoryStore(), Fence: httpfencetest.NewMemoryFence(), AllowUnauthenticatedFencing: true})
	require.NoError(t, err)
	_, err = httpfence.Middleware(httpfence.Options{Store: httpfencetest.NewMemoryStore(), Fence: httpfencetest.NewMemoryFence(), Verifier: testVerifier(t), TTL: time.Minute})
	require.ErrorIs(t, err, httpfence.ErrInvalidOptions, "TTL below MaxSignatureAge")

	mw, err := httpfence.Middleware(httpfence.Options{Store: httpfencetest.NewMemoryStore()})
	require.NoError(t, err)
	var seen []fence.Holder
	srv := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, _ := fence.HolderFromContext(r.Context())
		seen = append(seen, h)
	}))
	do := func(key string, fenced bool) int {
		r := httptest.NewRequest(http.MethodPost, "/p", nil)
		r.Header.Set("Idempotency-Key", key)
		if fenced {
			r.Header.Set("Fencing-Token", "7")
			r.Header.Set("Fencing-Owner", `"evil"`)
		}
		w := httptest.NewRecorder()
		srv.ServeHTTP(w, r)
		return w.Code
	}
	require.Equal(t, http.StatusForbidden, do(`"a"`, true))
	require.Equal(t, http.StatusOK, do(`"b"`, false))
	require.Equal(t, []fence.Holder{{}}, seen, "only the request without fencing headers ran")
}

// Keys are checked when made.
func TestSigningKeyValidation(t *testing.T) {
	t.Parallel()
	for _, k := range []httpfence.Key{
		{ID: "", Secret: keyNew.Secret},
		{ID: "a b", Secret: keyNew.Secret},
		{ID: `a"b`, Secret: keyNew.Secret},
		{ID: strings.Repeat("a", httpfence.MaxKeyIDLen+1), Secret: keyNew.Secret},
		{ID: "short", Secret: make([]byte, httpfence.MinSecretBytes-1)},
	} {
		_, err := httpfence.NewSigner(k)
		require.ErrorIs(t, err, httpfence.ErrInvalidSigningKey, "%q", k.ID)
		_, err = httpfence.NewVerifier(k)
		require.ErrorIs(t, err, httpfence.ErrInvalidSigningKey, "%q", k.ID)
	}
	_, err := httpfence.NewVerifier()
	require.ErrorIs(t, err, httpfence.ErrInvalidSigningKey)
	_, err = httpfence.NewVerifier(keyNew, keyRogue)
	require.ErrorIs(t, err, httpfence.ErrInvalidSigningKey, "two keys, one ID")
}

func TestParseSignature(t *testing.T) {
	t.Parallel()
	mac := strings.Repeat("A", 43) + "="
	good := []string{
		`kid="k1", t=1796774400, sig=:` + mac + `:`,
		`sig=:` + mac + `:,t=0,kid="k1"`,
		"  kid=\"k1\",\tt=5 , sig=:" + mac + ":  ",
	}
	for _, v := range good {
		s, err := httpfence.ParseSignature(v)
		require.NoError(t, err, v)
		require.Equal(t, "k1", s.KeyID)
		require.Len(t, s.MAC, 32)
	}
	for _, v := range []string{
		``, `kid="k1"`, `kid="k1", t=1`, `kid="k1", t=1, sig=:` + mac + `:,`,
		`kid="k1", kid="k1", t=1, sig=:` + mac + `:`,
		`kid="k1", t=1, t=1, sig=:` + mac + `:`,
		`kid="k1", t=-1, sig=:` + mac + `:`,
		`kid="k1", t=1234567890123456, sig=:` + mac + `:`,
		`kid="k 1", t=1, sig=:` + mac + `:`,
		`kid=k1, t=1, sig=:` + mac + `:`,
		`kid="k1";a=1, t=1, sig=:` + mac + `:`,
		`kid="k1", t=1, sig=:` + mac + `:;a`,
		`kid="k1", t=1, sig=:AAAA:`,
		`kid="k1", t=1, sig=:` + mac,
		`kid="k1", t=1, sig=:` + strings.Repeat("A", 43) + `:`,
		`kid="k1", t=1, sig=:` + mac + `:, x=1`,
		`kid="k1", t=1, sig`,
	} {
		_, err := httpfence.ParseSignature(v)
		require.ErrorIs(t, err, httpfence.ErrInvalidSignature, v)
	}
}

func FuzzParseSignature(f *testing.F) {
	f.Add(`kid="k1", t=1796774400, sig=:` + strings.Repeat("A", 43) + `=:`)
	f.Add(`sig=:=:,t=,kid=""`)
	f.Add(`kid="\"", t=1`)
	f.Fuzz(func(t *testing.T, v string) {
		s, err := httpfence.ParseSignature(v)
		if err != nil {
			require.ErrorIs(t, err, httpfence.ErrInvalidSignature)
			return
		}
		require.Len(t, s.MAC, 32)
		require.GreaterOrEqual(t, s.Time, int64(0))
		require.NotEmpty(t, s.KeyID)
		// What parses is a valid signing key ID.
		_, err = httpfence.NewSigner(httpfence.Key{ID: s.KeyID, Secret: keyNew.Secret})
		require.NoError(t, err)
	})
}

// The forged request of issue 32, replayed against the documented setup:
// a lease holder calls a service through a Transport with a Signer; the
// service's Middleware has a Verifier and real Redis stores. A caller that
// holds no lease and no key sends the request (a token 23 h ahead,
// and one 1 min ahead that passes MaxTokenAhead) and is refused without
// moving the fence; the holder's next request is admitted. The control
// shows the test can fail: the same forged request against a middleware
// that opts into unauthenticated fencing poisons the fence, and the
// holder's request is then refused as stale.
func TestForgedRequestCannotBlockTheHolder(t *testing.T) {
	t.Parallel()
	rdb := redistest.Real(t)
	prefix := redistest.Prefix(t, rdb)
	leases, err := lease.New(rdb, lease.Options{Prefix: prefix + "lease:"})
	require.NoError(t, err)

	serve := func(t *testing.T, opts httpfence.Options) (*httptest.Server, *int) {
		opts.Store = newRedisStore(t, rdb, prefix+t.Name()+":idem:")
		opts.Fence = newRedisFence(t, rdb, prefix+t.Name()+":fence:")
		mw, err := httpfence.Middleware(opts)
		require.NoError(t, err)
		var mu sync.Mutex
		runs := 0
		srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			runs++
			mu.Unlock()
			w.WriteHeader(http.StatusOK)
		})))
		t.Cleanup(srv.Close)
		return srv, &runs
	}
	forge := func(t *testing.T, srv *httptest.Server, key string, ahead time.Duration) int {
		req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/payouts", nil)
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", strconv.Quote(key))
		req.Header.Set("Fencing-Owner", `"evil"`)
		req.Header.Set("Fencing-Scope", `"push"`)
		req.Header.Set("Fencing-Token", strconv.FormatInt(time.Now().Add(ahead).UnixMicro(), 10))
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp.StatusCode
	}
	// legit is the holder's call: the lease's context carries its holder.
	legit := func(t *testing.T, srv *httptest.Server, signer *httpfence.Signer, key string) error {
		l, err := leases.Acquire(t.Context(), "push", 30*time.Second)
		require.NoError(t, err)
		defer func() { _ = l.Release(context.WithoutCancel(t.Context())) }()
		client := &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport, Signer: signer}}
		req, err := http.NewRequestWithContext(httpfence.WithIdempotencyKey(l.Context(), key), http.MethodPost, srv.URL+"/v1/payouts", strings.NewReader("{}"))
		require.NoError(t, err)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	}

	t.Run("DocumentedSetupRefusesTheForgery", func(t *testing.T) {
		srv, runs := serve(t, httpfence.Options{Verifier: testVerifier(t)})
		require.Equal(t, http.StatusForbidden, forge(t, srv, "x1", 23*time.Hour), "unsigned, before the ceiling is looked at")
		require.Equal(t, http.StatusForbidden, forge(t, srv, "x2", time.Minute), "unsigned")
		require.Equal(t, http.StatusForbidden, forge(t, srv, "x3", 0), "unsigned")
		require.NoError(t, legit(t, srv, testSigner(t), "slot-1"))
		require.NoError(t, legit(t, srv, testSigner(t), "slot-2"), "and the next slot")
		require.Equal(t, 2, *runs)
		// A holder with a key the service does not list is no holder.
		require.EqualError(t, legit(t, srv, signerOf(t, keyRogue), "slot-3"), "403 Forbidden")
	})
	t.Run("ControlUnauthenticatedIsPoisoned", func(t *testing.T) {
		srv, runs := serve(t, httpfence.Options{AllowUnauthenticatedFencing: true})
		require.Equal(t, http.StatusOK, forge(t, srv, "x2", time.Minute), "the forgery is admitted")
		err := legit(t, srv, nil, "slot-1")
		require.ErrorIs(t, err, fence.ErrStaleToken, "the holder is blocked")
		require.Equal(t, 1, *runs)
	})
}

// The signature's cost per request, both ends: the Transport signing a
// request (the body hashed, one HMAC) and the middleware verifying it (the
// header parsed, the body hashed, one HMAC), against memory stores with a
// new key per request, next to the same middleware without a Verifier.
//
//	go test -run '^$' -bench Signature -benchmem ./sinks/httpfence/
func BenchmarkSignature(b *testing.B) {
	now := time.Now()
	h := fence.Holder{Scope: "settle", Token: fence.Token(now.UnixMicro()), Owner: "replica-a"}
	body := `{"total":1250}`
	c := &captured{}
	tr := &httpfence.Transport{Base: c, Signer: signerOf(b, keyNew)}
	ctx := fence.WithHolder(context.Background(), h)
	b.Run("Sign", func(b *testing.B) {
		for b.Loop() {
			req, _ := http.NewRequestWithContext(httpfence.WithIdempotencyKey(ctx, "k"), http.MethodPost, "http://sink.test/settlements", strings.NewReader(body))
			resp, err := tr.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			_ = resp.Body.Close()
			c.reqs, c.body = c.reqs[:0], c.body[:0]
		}
	})
	for _, signed := range []bool{false, true} {
		name := "MiddlewareUnsigned"
		opts := httpfence.Options{Store: httpfencetest.NewMemoryStore(), Fence: httpfencetest.NewMemoryFence(), AllowUnauthenticatedFencing: true}
		if signed {
			name, opts.Verifier, opts.AllowUnauthenticatedFencing = "MiddlewareVerified", testVerifier(b), false
		}
		mw, err := httpfence.Middleware(opts)
		if err != nil {
			b.Fatal(err)
		}
		srv := mw(benchHandler)
		b.Run(name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				i++
				key := "k" + strconv.Itoa(i)
				req, _ := http.NewRequestWithContext(httpfence.WithIdempotencyKey(ctx, key), http.MethodPost, "http://sink.test/settlements", strings.NewReader(body))
				resp, err := tr.RoundTrip(req) // signs into c
				if err != nil {
					b.Fatal(err)
				}
				_ = resp.Body.Close()
				r := httptest.NewRequest(http.MethodPost, "/settlements", strings.NewReader(body))
				r.Header = c.reqs[0].Header
				c.reqs, c.body = c.reqs[:0], c.body[:0]
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, r)
				if w.Code != http.StatusCreated {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
		})
	}
}
