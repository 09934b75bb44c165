package httpfence_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/httpfencetest"
)

// Both spans carry the idempotency key, the parsed scope and the token
// (docs/operations.md, "Traces"), the client's taken from the context the
// Transport sends them from, and neither carries the owner.
func TestSpansCarryKeyScopeAndToken(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	mw, err := httpfence.Middleware(httpfence.Options{
		Store: httpfencetest.NewMemoryStore(), Fence: httpfencetest.NewMemoryFence(),
		Verifier: testVerifier(t), TracerProvider: tp,
	})
	require.NoError(t, err)
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})))
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport, Signer: testSigner(t), TracerProvider: tp}}

	const owner = "owner-secret-0123456789"
	h := fence.Holder{Scope: "settle|eu", Token: 1_000_000, Owner: owner}
	ctx := httpfence.WithIdempotencyKey(fence.WithHolder(t.Context(), h), "settle:2026-03-08T02:00:00Z:eu")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/charges", strings.NewReader("{}"))
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	spans := map[string]map[string]string{}
	for _, sp := range rec.Ended() {
		attrs := map[string]string{}
		for _, a := range sp.Attributes() {
			attrs[string(a.Key)] = a.Value.String()
			require.NotContains(t, a.Value.String(), owner, "span %s attribute %s", sp.Name(), a.Key)
		}
		spans[sp.Name()] = attrs
	}
	for _, name := range []string{"holdfast.httpfence.request", "holdfast.httpfence.serve"} {
		require.Contains(t, spans, name)
		attrs := spans[name]
		require.Equal(t, "settle:2026-03-08T02:00:00Z:eu", attrs["holdfast.idempotency_key"], name)
		require.Equal(t, "settle|eu", attrs["holdfast.fence.scope"], name)
		require.Equal(t, "1000000", attrs["holdfast.fence.token"], name)
		require.Equal(t, "/v1/charges", attrs["url.path"], name)
		require.Equal(t, "201", attrs["http.response.status_code"], name)
	}
}
