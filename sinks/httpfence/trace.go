package httpfence

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of httpfence's spans: the
// Transport's holdfast.httpfence.request (kind client; the W3C
// traceparent goes with every attempt) and the Middleware's
// holdfast.httpfence.serve (kind server, continuing the caller's trace),
// with event holdfast.stale_token_rejected on a 412 for a stale token.
// No attribute holds the owner.
const tracerName = "github.com/holdfast-go/holdfast/sinks/httpfence"

func tracerOf(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// propagatorOr returns p, or W3C Trace Context when p is nil.
func propagatorOr(p propagation.TextMapPropagator) propagation.TextMapPropagator {
	if p == nil {
		return propagation.TraceContext{}
	}
	return p
}

// requestAttrs are the attributes both sides give a fenced request with
// header h: the method, the path, and the idempotency key, scope and token
// as parsed from h (a field that does not parse is left out). Never the
// owner.
func requestAttrs(r *http.Request, h http.Header) []attribute.KeyValue {
	attrs := []attribute.KeyValue{attribute.String("http.request.method", r.Method),
		attribute.String("url.path", r.URL.Path)}
	if k, err := ParseKey(h.Get(KeyHeader)); err == nil && k != "" {
		attrs = append(attrs, attribute.String("holdfast.idempotency_key", k))
	}
	if v := h.Get(ScopeHeader); v != "" {
		if s, err := parseScope(v); err == nil {
			attrs = append(attrs, attribute.String("holdfast.fence.scope", s))
		}
	}
	if tok := h.Get(TokenHeader); tok != "" {
		attrs = append(attrs, attribute.String("holdfast.fence.token", tok))
	}
	return attrs
}

// endHTTPSpan ends span with the response's status code, or err.
func endHTTPSpan(span trace.Span, status int, err error) {
	if span.IsRecording() {
		if status != 0 {
			span.SetAttributes(attribute.Int("http.response.status_code", status))
		}
		switch {
		case err != nil:
			span.SetStatus(codes.Error, err.Error())
		case status == http.StatusPreconditionFailed:
			span.SetStatus(codes.Error, "stale fencing token")
		case status >= 500:
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	}
	span.End()
}

// startRequest starts the Transport's span for req and returns req with
// it in its context.
func (t *Transport) startRequest(req *http.Request) (*http.Request, trace.Span) {
	ctx, span := tracerOf(t.TracerProvider).Start(req.Context(), "holdfast.httpfence.request", trace.WithSpanKind(trace.SpanKindClient))
	if span.IsRecording() {
		// The key and the fencing headers come from the context (set on
		// each attempt by roundTrip): read them as they will be sent.
		// An error here is roundTrip's to return.
		h := req.Header.Clone()
		if h == nil {
			h = http.Header{}
		}
		_ = setHeaders(req.Context(), h)
		span.SetAttributes(requestAttrs(req, h)...)
	}
	return req.WithContext(ctx), span
}

// inject puts the trace context of ctx into h (traceparent).
func (t *Transport) inject(ctx context.Context, h http.Header) {
	propagatorOr(t.Propagator).Inject(ctx, propagation.HeaderCarrier(h))
}

// statusRecorder keeps the status code a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// traced serves r through serve under the Middleware's span, which
// continues the caller's trace (the traceparent header).
func (m *middleware) traced(w http.ResponseWriter, r *http.Request, serve func(http.ResponseWriter, *http.Request)) {
	ctx := propagatorOr(m.cfg.Propagator).Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := tracerOf(m.cfg.TracerProvider).Start(ctx, "holdfast.httpfence.serve", trace.WithSpanKind(trace.SpanKindServer))
	if !span.IsRecording() {
		span.End()
		serve(w, r.WithContext(ctx))
		return
	}
	span.SetAttributes(requestAttrs(r, r.Header)...)
	rec := &statusRecorder{ResponseWriter: w}
	serve(rec, r.WithContext(ctx))
	if rec.status == http.StatusPreconditionFailed {
		span.AddEvent("holdfast.stale_token_rejected")
	}
	endHTTPSpan(span, rec.status, nil)
}
