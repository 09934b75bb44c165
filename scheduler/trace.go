package scheduler

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// This file holds the scheduler's spans (docs/operations.md, "Traces"):
// holdfast.claim while a claim holds a unit's lease, and under it one
// holdfast.attempt per attempt, whose context the job function receives,
// so that sink writes (pgfence, httpfence's Transport) are its children.
// Events: holdfast.stale_token_rejected, holdfast.slot_skipped,
// holdfast.ledger_reset. No attribute holds the lease owner.

// tracerName is the instrumentation scope of the scheduler's spans.
const tracerName = "github.com/holdfast-go/holdfast/scheduler"

// Span and event names.
const (
	spanClaim        = "holdfast.claim"
	spanAttempt      = "holdfast.attempt"
	eventStale       = "holdfast.stale_token_rejected"
	eventSkipped     = "holdfast.slot_skipped"
	eventLedgerReset = "holdfast.ledger_reset"
)

func newTracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// tracer returns s's tracer (a no-op one for a Scheduler not made by New).
func (s *Scheduler) tracer() trace.Tracer {
	if s.tr == nil {
		return noop.NewTracerProvider().Tracer(tracerName)
	}
	return s.tr
}

// traceClaim starts the span of a claim under h (a consumer's "receive"
// of the unit's slots, in the messaging conventions' terms) and returns h
// with the span in its context, and the span's end.
func (s *Scheduler) traceClaim(h hold, req claimReq) (hold, func()) {
	ctx, span := s.tracer().Start(h.ctx(), spanClaim, trace.WithSpanKind(trace.SpanKindConsumer))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("messaging.operation.type", "receive"),
			attribute.String("holdfast.job", h.u.job.Name), attribute.String("holdfast.partition", h.u.partition),
			attribute.Int64("holdfast.fence.token", int64(h.fence.Token)), attribute.String("holdfast.fence.scope", h.fence.Scope),
			attribute.String("holdfast.holder", h.fence.Holder))
		if !req.fire.At.IsZero() {
			span.SetAttributes(attribute.String("holdfast.slot", slotText(req.fire.At)))
		}
	}
	h.tctx = ctx
	return h, func() { span.End() }
}

// traceAttempt starts the span of attempt run (the messaging conventions'
// "process") under ctx, the attempt's context.
func (s *Scheduler) traceAttempt(ctx context.Context, run Run) (context.Context, trace.Span) {
	holder := s.cfg.Holder
	ctx, span := s.tracer().Start(ctx, spanAttempt, trace.WithSpanKind(trace.SpanKindConsumer))
	if span.IsRecording() {
		span.SetAttributes(attribute.String("messaging.operation.type", "process"),
			attribute.String("holdfast.job", run.Slot.Job), attribute.String("holdfast.partition", run.Slot.Partition),
			attribute.String("holdfast.slot", slotText(run.Slot.At)), attribute.Int("holdfast.attempt", run.Attempt),
			attribute.Int64("holdfast.fence.token", int64(run.Token)), attribute.String("holdfast.fence.scope", run.Scope),
			attribute.String("holdfast.holder", holder), attribute.String("holdfast.idempotency_key", run.IdempotencyKey))
	}
	return ctx, span
}

// endAttempt ends an attempt's span with its outcome.
func endAttempt(span trace.Span, o ledger.Outcome) {
	if span.IsRecording() {
		span.SetAttributes(attribute.String("holdfast.status", string(o.Status)))
		if o.Status == ledger.StatusFailed {
			span.SetAttributes(attribute.String("holdfast.error_class", string(o.Class)))
			span.SetStatus(codes.Error, o.Error)
		}
	}
	span.End()
}

// traceEvent adds event name to the span of ctx (a claim's or an
// attempt's), for slot.
func traceEvent(ctx context.Context, name string, slot ledger.Slot, attrs ...attribute.KeyValue) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	span.AddEvent(name, trace.WithAttributes(append(attrs, attribute.String("holdfast.job", slot.Job),
		attribute.String("holdfast.partition", slot.Partition), attribute.String("holdfast.slot", slotText(slot.At)))...))
}

// slotText is a slot instant as spans show it: UTC, RFC 3339.
func slotText(at time.Time) string { return at.UTC().Format(time.RFC3339Nano) }
