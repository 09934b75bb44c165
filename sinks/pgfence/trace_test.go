package pgfence_test

import (
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// Check's span is a child of the caller's, names the resource, scope and
// token (never the owner), and a stale token is an error with event
// holdfast.stale_token_rejected.
func TestCheckSpans(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	b := setup(t)
	guard, err := pgfence.New(pgfence.Options{Schema: b.schema, TracerProvider: tp})
	require.NoError(t, err)

	ctx, parent := tp.Tracer("test").Start(t.Context(), "job")
	const owner = "owner-secret-capability"
	require.NoError(t, guard.Check(ctx, b.pool, "invoice/7", fence.Holder{Scope: "billing", Token: 9, Owner: owner}))
	err = guard.Check(ctx, b.pool, "invoice/7", fence.Holder{Scope: "billing", Token: 8, Owner: "other"})
	require.ErrorIs(t, err, fence.ErrStaleToken)
	parent.End()

	var checks []sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		if sp.Name() == "holdfast.pgfence.check" {
			checks = append(checks, sp)
		}
	}
	require.Len(t, checks, 2)
	for _, sp := range checks {
		require.Equal(t, parent.SpanContext().SpanID(), sp.Parent().SpanID())
		attrs := map[string]string{}
		for _, kv := range sp.Attributes() {
			attrs[string(kv.Key)] = kv.Value.String()
			require.NotContains(t, kv.Value.String(), owner)
		}
		require.Equal(t, "invoice/7", attrs["holdfast.resource"])
		require.Equal(t, "billing", attrs["holdfast.fence.scope"])
		require.Equal(t, "postgresql", attrs["db.system.name"])
	}
	require.Equal(t, codes.Unset, checks[0].Status().Code)
	require.Equal(t, codes.Error, checks[1].Status().Code)
	require.Len(t, checks[1].Events(), 1)
	require.Equal(t, "holdfast.stale_token_rejected", checks[1].Events()[0].Name)
}
