package httpfence_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/httpfencetest"
)

// TestMiddlewarePutsKeyInContext: a wrapped handler reads the request's
// Idempotency-Key with KeyFromContext (issue 37: it read "" before, and a
// handler stored its effects under empty keys).
func TestMiddlewarePutsKeyInContext(t *testing.T) {
	t.Parallel()
	mw, err := httpfence.Middleware(httpfence.Options{
		Store: httpfencetest.NewMemoryStore(),
	})
	require.NoError(t, err)
	var got string
	var gotOK bool
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, gotOK = httpfence.KeyFromContext(r.Context())
		w.WriteHeader(http.StatusCreated)
	}))
	req := httptest.NewRequest(http.MethodPost, "/pay", strings.NewReader("{}"))
	req.Header.Set(httpfence.KeyHeader, `"settle:2026-12-05T00:00:00Z:eu"`)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	require.True(t, gotOK)
	require.Equal(t, "settle:2026-12-05T00:00:00Z:eu", got)
}
