package lease

import (
	"context"
	"errors"

	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the lease client's spans.
const tracerName = "github.com/holdfast-go/holdfast/lease"

// Span names (docs/operations.md, "Traces").
const (
	spanAcquire = "holdfast.lease.acquire"
	spanRenew   = "holdfast.lease.renew"
	spanLost    = "holdfast.lease.lost"
)

// tracing holds a Client's tracer and its span options, built once.
type tracing struct {
	tracer trace.Tracer
	client trace.SpanStartOption
	inner  trace.SpanStartOption
	// always: Options.TracerProvider was set, and every acquisition is
	// traced; otherwise (the global provider) only those made under a
	// recording span of the caller, so that a process that traces nothing
	// pays nothing per acquisition (a span costs 4 allocations even on a
	// no-op provider, and the lease client's budget is 17 per
	// acquire+release).
	always bool
}

func newTracing(tp trace.TracerProvider) tracing {
	always := tp != nil
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tracing{tracer: tp.Tracer(tracerName), client: trace.WithSpanKind(trace.SpanKindClient),
		inner: trace.WithSpanKind(trace.SpanKindInternal), always: always}
}

// traced reports whether an acquisition under ctx gets a span.
func (t tracing) traced(ctx context.Context) bool {
	return t.always || trace.SpanFromContext(ctx).IsRecording()
}

// noSpan is the span of an acquisition that is not traced.
func noSpan() trace.Span { return trace.SpanFromContext(context.Background()) }

// startAcquire starts the span of one acquisition try of name. The
// attributes never hold the owner (a write capability): the holder label
// and, once granted, the fencing token and its scope.
func (c *Client) startAcquire(ctx context.Context, name string) (context.Context, trace.Span) {
	if !c.tr.traced(ctx) {
		return ctx, noSpan()
	}
	ctx, span := c.tr.tracer.Start(ctx, spanAcquire, c.tr.client)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("holdfast.lease", name), attribute.String("holdfast.holder", c.opts.Holder))
	}
	return ctx, span
}

// endAcquire ends an acquisition's span with its outcome: acquired (the
// token), held (not an error), or the error.
func endAcquire(span trace.Span, l *Lease, err error) {
	if span.IsRecording() {
		switch {
		case err == nil:
			span.SetAttributes(attribute.String("holdfast.lease.outcome", "acquired"),
				attribute.Int64("holdfast.fence.token", int64(l.token)), attribute.String("holdfast.fence.scope", l.name))
		case errors.Is(err, ErrNotAcquired):
			span.SetAttributes(attribute.String("holdfast.lease.outcome", "held"))
		default:
			span.SetAttributes(attribute.String("holdfast.lease.outcome", "error"))
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// startAcquireAll starts the span of one batch of acquisitions
// (TryAcquireAll): the count, and the name of a batch of one.
func (c *Client) startAcquireAll(ctx context.Context, reqs []leasedriver.AcquireRequest) (context.Context, trace.Span) {
	if !c.tr.traced(ctx) {
		return ctx, noSpan()
	}
	ctx, span := c.tr.tracer.Start(ctx, spanAcquire, c.tr.client)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("holdfast.lease.count", len(reqs)), attribute.String("holdfast.holder", c.opts.Holder))
		if len(reqs) == 1 {
			span.SetAttributes(attribute.String("holdfast.lease", reqs[0].Name))
		}
	}
	return ctx, span
}

// endAcquireAll ends a batch's span: how many were acquired, and the
// token of a batch of one; the first error other than a held lease.
func endAcquireAll(span trace.Span, leases []*Lease, errs []error) {
	if span.IsRecording() {
		acquired := 0
		for i, l := range leases {
			switch err := errs[i]; {
			case err == nil && l != nil:
				acquired++
				if len(leases) == 1 {
					span.SetAttributes(attribute.Int64("holdfast.fence.token", int64(l.token)), attribute.String("holdfast.fence.scope", l.name))
				}
			case err != nil && !errors.Is(err, ErrNotAcquired):
				span.SetStatus(codes.Error, err.Error())
			}
		}
		span.SetAttributes(attribute.Int("holdfast.lease.acquired", acquired))
	}
	span.End()
}

// traceRenew records a keep-alive round trip that renewed n leases, failed
// of them without an answer and lost of them not held any more.
func (c *Client) traceRenew(ctx context.Context, n, failed, lost int, err error) {
	_, span := c.tr.tracer.Start(ctx, spanRenew, c.tr.client)
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("holdfast.lease.count", n), attribute.Int("holdfast.lease.failed", failed),
			attribute.Int("holdfast.lease.lost", lost))
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// traceLoss records that the lease l was lost for reason (not a release).
func (l *Lease) traceLoss(reason error) {
	_, span := l.c.tr.tracer.Start(context.Background(), spanLost, l.c.tr.inner)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("holdfast.lease", l.name), attribute.Int64("holdfast.fence.token", int64(l.token)),
			attribute.String("holdfast.fence.scope", l.name), attribute.String("holdfast.holder", l.c.opts.Holder),
			attribute.String("holdfast.lease.cause", reason.Error()))
		span.SetStatus(codes.Error, reason.Error())
	}
	span.End()
}
