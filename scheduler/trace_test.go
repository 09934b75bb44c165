package scheduler_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasetest"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger/ledgertest"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/httpfencetest"
)

// One slot, traced from the lease through the claim and the attempt to
// an httpfence write and the service's middleware: one trace, each span
// the child of the one before, the attributes of the slot on them, and
// the owner (a write capability) in no attribute or event.
func TestSpanTreeFromClaimToSink(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })

	mw, err := httpfence.Middleware(httpfence.Options{Store: httpfencetest.NewMemoryStore(), Fence: httpfencetest.NewMemoryFence(),
		AllowUnauthenticatedFencing: true, TracerProvider: tp})
	require.NoError(t, err)
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})))
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &httpfence.Transport{TracerProvider: tp}}

	leases, err := lease.NewWithBackend(leasetest.NewMemoryBackend(nil), lease.Options{TracerProvider: tp})
	require.NoError(t, err)
	var mu sync.Mutex
	var owner string
	var ran scheduler.Run
	done := make(chan struct{})
	first := time.Now().Truncate(time.Second).Add(time.Second).UTC()
	s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ledgertest.NewMemory(), Holder: "replica-1", TracerProvider: tp})
	require.NoError(t, err)
	require.NoError(t, s.Register(scheduler.Job{Name: "traced", Spec: "* * * * * *", StartAt: first, EndAt: first.Add(time.Second),
		Run: func(ctx context.Context, run scheduler.Run) error {
			ctx = httpfence.WithIdempotencyKey(fence.WithHolder(ctx, run.Holder()), run.IdempotencyKey)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/charges", strings.NewReader(`{}`))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			if owner == "" {
				owner, ran = run.Owner, run
				close(done)
			}
			return nil
		}}))
	require.NoError(t, s.Start(context.Background()))
	testwait.Done(t, done, 10*time.Second, "the slot ran")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, s.Stop(ctx))

	spans := rec.Ended()
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, sp := range spans {
		if _, ok := byName[sp.Name()]; !ok {
			byName[sp.Name()] = sp
		}
		for _, kv := range sp.Attributes() {
			require.NotContains(t, kv.Value.String(), owner, "span %s attribute %s holds the owner", sp.Name(), kv.Key)
		}
		for _, ev := range sp.Events() {
			for _, kv := range ev.Attributes {
				require.NotContains(t, kv.Value.String(), owner, "span %s event %s holds the owner", sp.Name(), ev.Name)
			}
		}
	}
	for _, name := range []string{"holdfast.lease.acquire", "holdfast.claim", "holdfast.attempt", "holdfast.httpfence.request", "holdfast.httpfence.serve"} {
		require.Contains(t, byName, name)
	}
	claim, attempt := byName["holdfast.claim"], byName["holdfast.attempt"]
	request, serve := byName["holdfast.httpfence.request"], byName["holdfast.httpfence.serve"]
	require.Equal(t, claim.SpanContext().SpanID(), attempt.Parent().SpanID(), "attempt under claim")
	require.Equal(t, attempt.SpanContext().SpanID(), request.Parent().SpanID(), "sink request under attempt")
	require.Equal(t, request.SpanContext().SpanID(), serve.Parent().SpanID(), "server span continues the client's (traceparent)")
	require.True(t, serve.Parent().IsRemote())
	require.Equal(t, claim.SpanContext().TraceID(), serve.SpanContext().TraceID(), "one trace")
	require.Equal(t, trace.SpanKindConsumer, attempt.SpanKind())
	require.Equal(t, trace.SpanKindServer, serve.SpanKind())

	attrs := func(sp sdktrace.ReadOnlySpan) map[string]string {
		m := map[string]string{}
		for _, kv := range sp.Attributes() {
			m[string(kv.Key)] = kv.Value.String()
		}
		return m
	}
	a := attrs(attempt)
	require.Equal(t, "traced", a["holdfast.job"])
	require.Equal(t, ran.Slot.At.UTC().Format(time.RFC3339Nano), a["holdfast.slot"])
	require.Equal(t, "1", a["holdfast.attempt"])
	require.Equal(t, strconv.FormatUint(uint64(ran.Token), 10), a["holdfast.fence.token"])
	require.Equal(t, ran.Scope, a["holdfast.fence.scope"])
	require.Equal(t, "replica-1", a["holdfast.holder"])
	require.Equal(t, "succeeded", a["holdfast.status"])
	require.Equal(t, "process", a["messaging.operation.type"])
	require.Equal(t, ran.IdempotencyKey, attrs(serve)["holdfast.idempotency_key"])
	require.Equal(t, "201", attrs(serve)["http.response.status_code"])
	require.Equal(t, strconv.FormatUint(uint64(ran.Token), 10), attrs(byName["holdfast.lease.acquire"])["holdfast.fence.token"])
}
