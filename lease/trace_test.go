package lease_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasetest"
)

// A lease's spans: its acquisition (the token, the holder label, never
// the owner), the keep-alive's renewals, and its loss (error status, the
// cause).
func TestLeaseSpans(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	backend, err := leasetest.NewMemoryBackend(nil).WithHolder("replica-1")
	require.NoError(t, err)
	c, err := lease.NewWithBackend(backend, lease.Options{TracerProvider: tp})
	require.NoError(t, err)
	l, err := c.TryAcquire(t.Context(), "report", 300*time.Millisecond)
	require.NoError(t, err)
	_, err = c.TryAcquire(t.Context(), "report", 300*time.Millisecond)
	require.ErrorIs(t, err, lease.ErrNotAcquired)
	testwait.Until(t, 5*time.Second, "a renewal", func() bool { return count(rec, "holdfast.lease.renew") > 0 })
	backend.Expire("report")
	testwait.Done(t, l.Done(), 5*time.Second, "the loss")
	testwait.Until(t, 5*time.Second, "the loss span", func() bool { return count(rec, "holdfast.lease.lost") == 1 })

	var acquires []sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		attrs := map[string]string{}
		for _, kv := range sp.Attributes() {
			attrs[string(kv.Key)] = kv.Value.String()
			require.NotContains(t, kv.Value.String(), l.Holder().Owner, "span %s attribute %s holds the owner", sp.Name(), kv.Key)
		}
		switch sp.Name() {
		case "holdfast.lease.acquire":
			acquires = append(acquires, sp)
			require.Equal(t, "report", attrs["holdfast.lease"])
			require.Equal(t, "replica-1", attrs["holdfast.holder"])
		case "holdfast.lease.lost":
			require.Equal(t, codes.Error, sp.Status().Code)
			require.Equal(t, "report", attrs["holdfast.lease"])
			require.Equal(t, l.Token().String(), attrs["holdfast.fence.token"])
			require.NotEmpty(t, attrs["holdfast.lease.cause"])
		}
	}
	require.Len(t, acquires, 2)
	first := map[string]string{}
	for _, kv := range acquires[0].Attributes() {
		first[string(kv.Key)] = kv.Value.String()
	}
	require.Equal(t, "acquired", first["holdfast.lease.outcome"])
	require.Equal(t, l.Token().String(), first["holdfast.fence.token"])
	second := map[string]string{}
	for _, kv := range acquires[1].Attributes() {
		second[string(kv.Key)] = kv.Value.String()
	}
	require.Equal(t, "held", second["holdfast.lease.outcome"])
	require.Equal(t, codes.Unset, acquires[1].Status().Code, "a held lease is no error")
}

func count(rec *tracetest.SpanRecorder, name string) int {
	n := 0
	for _, sp := range rec.Ended() {
		if sp.Name() == name {
			n++
		}
	}
	return n
}
