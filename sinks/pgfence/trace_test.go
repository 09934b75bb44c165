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

// FencedUpdate and FencedUpsert (package functions, no Options) make their
// span in the tracer provider of the caller's span, as its child, when
// ctx carries one that records; with none they make no span at all (a
// span on the global no-op provider cost 5 allocations per write).
func TestFencedWriteSpansFollowTheCaller(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	tb := newTable(t)
	tb.insert(t, "a")

	ctx, parent := tp.Tracer("test").Start(t.Context(), "job")
	require.NoError(t, pgfence.FencedUpdate(ctx, tb.pool, tb.row("a"), map[string]any{"value": "v1"}, fence.Holder{Token: 5, Owner: "owner-secret"}))
	err := pgfence.FencedUpdate(ctx, tb.pool, tb.row("a"), map[string]any{"value": "v0"}, fence.Holder{Token: 4, Owner: "other"})
	require.ErrorIs(t, err, fence.ErrStaleToken)
	require.NoError(t, pgfence.FencedUpsert(ctx, tb.pool, tb.row("b"), map[string]any{"value": "v1"}, fence.Holder{Token: 6, Owner: "owner-secret"}))
	parent.End()
	// Without a recording span: no span, the write done all the same.
	require.NoError(t, pgfence.FencedUpdate(t.Context(), tb.pool, tb.row("a"), map[string]any{"value": "v2"}, fence.Holder{Token: 7, Owner: "owner-secret"}))

	var names []string
	for _, sp := range rec.Ended() {
		if sp.Name() == "job" {
			continue
		}
		names = append(names, sp.Name())
		require.Equal(t, parent.SpanContext().SpanID(), sp.Parent().SpanID(), sp.Name())
		for _, kv := range sp.Attributes() {
			require.NotContains(t, kv.Value.String(), "owner-secret")
		}
	}
	require.Equal(t, []string{"holdfast.pgfence.update", "holdfast.pgfence.update", "holdfast.pgfence.upsert"}, names)
	require.Equal(t, "v2", tb.get(t, "a").Value)
}
