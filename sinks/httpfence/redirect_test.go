package httpfence_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/httpfencetest"
)

// redirectService is a real service behind a Middleware with a Verifier:
// it records the headers of every request it receives and counts the
// handler's runs.
type redirectService struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []http.Header
	runs int
}

func newRedirectService(t *testing.T) *redirectService {
	t.Helper()
	s := &redirectService{}
	mw, err := httpfence.Middleware(httpfence.Options{
		Store: httpfencetest.NewMemoryStore(), Fence: httpfencetest.NewMemoryFence(), Verifier: testVerifier(t),
	})
	require.NoError(t, err)
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.runs++
		s.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/old" { // a same-origin redirect of the service's own
			w.Header().Set("Location", "/v1/charges?amount=999999")
			w.WriteHeader(http.StatusTemporaryRedirect)
			return
		}
		s.mu.Lock()
		s.seen = append(s.seen, r.Header.Clone())
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *redirectService) state() ([]http.Header, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]http.Header(nil), s.seen...), s.runs
}

// A host the job calls cannot make the Transport sign a request of its
// choosing for another host: the redirected request carries neither
// signature nor fencing headers, and the real service never runs it. A
// same-origin redirect keeps the fencing headers but is not signed. The
// negative control, the same request sent directly, is signed and runs.
func TestRedirectIsNeverSigned(t *testing.T) {
	t.Parallel()
	holder := fence.Holder{Scope: "charges", Token: fence.Token(1), Owner: "holder-owner-secret"}
	newClient := func() *http.Client {
		return &http.Client{Transport: &httpfence.Transport{Signer: testSigner(t), MaxAttempts: 1}}
	}
	post := func(t *testing.T, url string) *http.Response {
		t.Helper()
		ctx := httpfence.WithIdempotencyKey(fence.WithHolder(context.Background(), holder), "op-1")
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"amount":10}`))
		require.NoError(t, err)
		resp, err := newClient().Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp
	}

	t.Run("CrossOrigin", func(t *testing.T) {
		t.Parallel()
		real := newRedirectService(t)
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", real.srv.URL+"/v1/charges?amount=999999&to=attacker")
			w.WriteHeader(http.StatusTemporaryRedirect)
		}))
		t.Cleanup(evil.Close)

		resp := post(t, evil.URL+"/v1/quote")
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "no fencing headers reach the real service")
		seen, runs := real.state()
		require.Equal(t, 0, runs, "the redirected charge never ran")
		require.Len(t, seen, 1)
		for _, h := range []string{httpfence.SignatureHeader, httpfence.TokenHeader, httpfence.OwnerHeader, httpfence.ScopeHeader} {
			require.Empty(t, seen[0].Values(h), h)
		}
	})
	t.Run("ChainThroughAnotherOrigin", func(t *testing.T) {
		t.Parallel()
		real := newRedirectService(t)
		// evil -> real/old -> real/v1/charges: the last hop's predecessor
		// has the same origin, but the chain passed through evil.
		evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", real.srv.URL+"/old")
			w.WriteHeader(http.StatusTemporaryRedirect)
		}))
		t.Cleanup(evil.Close)
		resp := post(t, evil.URL+"/v1/quote")
		require.Equal(t, http.StatusBadRequest, resp.StatusCode)
		seen, runs := real.state()
		require.Equal(t, 0, runs)
		require.Len(t, seen, 1)
		for _, h := range []string{httpfence.SignatureHeader, httpfence.TokenHeader, httpfence.OwnerHeader, httpfence.ScopeHeader} {
			require.Empty(t, seen[0].Values(h), h)
		}
	})
	t.Run("SameOriginUnsigned", func(t *testing.T) {
		t.Parallel()
		real := newRedirectService(t)
		resp := post(t, real.srv.URL+"/old")
		require.Equal(t, http.StatusForbidden, resp.StatusCode, "unsigned: the Verifier refuses it")
		seen, runs := real.state()
		require.Equal(t, 0, runs)
		require.Len(t, seen, 1)
		require.Empty(t, seen[0].Values(httpfence.SignatureHeader))
		require.Equal(t, "1", seen[0].Get(httpfence.TokenHeader), "same origin: the fencing headers are kept")
	})
	t.Run("DirectControl", func(t *testing.T) {
		t.Parallel()
		real := newRedirectService(t)
		resp := post(t, real.srv.URL+"/v1/charges?amount=10")
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		seen, runs := real.state()
		require.Equal(t, 1, runs)
		require.Len(t, seen, 1)
		require.NotEmpty(t, seen[0].Get(httpfence.SignatureHeader))
	})
}
