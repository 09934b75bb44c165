package httpfence_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/httpfencetest"
)

// A handler that fences its own write (the package's Non-guarantees advise
// it) refuses an old holder with its own 412 stale-fencing-token. That
// answer is not stored: the current holder, sending the same slot's key
// later, runs the handler instead of getting the old holder's refusal.
func TestHandlerStaleRefusalIsNotReplayedToTheNextHolder(t *testing.T) {
	t.Parallel()
	const resource = "/settle"
	effects := httpfencetest.NewMemoryFence() // the handler's own guard
	ctx := t.Context()
	// B (token 200) already wrote the effect elsewhere: A's write is stale.
	require.NoError(t, effects.Accept(ctx, resource, fence.Holder{Scope: "settle", Token: 200, Owner: "owner-b"}))

	runs := 0
	mw, err := httpfence.Middleware(httpfence.Options{
		Store: httpfencetest.NewMemoryStore(), Fence: httpfencetest.NewMemoryFence(),
		Identity: func(*http.Request) string { return "tenant" },
	})
	require.NoError(t, err)
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		holder, _ := fence.HolderFromContext(r.Context())
		var stale *fence.StaleTokenError
		if err := effects.Accept(r.Context(), resource, holder); errors.As(err, &stale) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusPreconditionFailed)
			_ = json.NewEncoder(w).Encode(map[string]any{"type": "https://holdfast.dev/problems/stale-fencing-token",
				"status": 412, "presentedToken": stale.Presented, "currentToken": stale.Current})
			return
		}
		w.WriteHeader(http.StatusCreated)
	}))
	send := func(token, owner string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "http://sink.test"+resource, strings.NewReader("{}"))
		r.Header.Set("Idempotency-Key", `"settle:2026-03-08T02:00:00Z:eu"`)
		r.Header.Set("Fencing-Scope", `"settle"`)
		r.Header.Set("Fencing-Token", token)
		r.Header.Set("Fencing-Owner", owner)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}

	a := send("50", `"owner-a"`)
	require.Equal(t, http.StatusPreconditionFailed, a.Code, a.Body.String())
	require.Contains(t, a.Body.String(), `"presentedToken":50`)
	require.Equal(t, 1, runs)

	b := send("200", `"owner-b"`)
	require.Equal(t, http.StatusCreated, b.Code, "B must run, not get A's stored 412: %s", b.Body.String())
	require.Equal(t, 2, runs)

	// B's answer is stored as usual: a retry of B's gets it replayed.
	require.Equal(t, http.StatusCreated, send("200", `"owner-b"`).Code)
	require.Equal(t, 2, runs)
}
