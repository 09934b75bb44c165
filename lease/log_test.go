package lease_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/lease"
)

// A JSON handler prints slog.Duration as integer nanoseconds
// ("ttl":5000000000); the lease logs durations as their String form.
func TestLogsDurationsAsDurationStrings(t *testing.T) {
	t.Parallel()
	rdb := redistest.Mini(t)
	var buf bytes.Buffer
	c, err := lease.New(rdb, lease.Options{
		Prefix: redistest.Prefix(t, rdb),
		Logger: slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	require.NoError(t, err)
	l, err := c.TryAcquire(t.Context(), "settle", 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, l.Release(t.Context()))

	var acquired map[string]any
	for line := range strings.Lines(buf.String()) {
		if strings.Contains(line, `"msg":"lease_acquired"`) {
			require.Contains(t, line, `"ttl":"5s"`)
			require.NoError(t, json.Unmarshal([]byte(line), &acquired))
		}
	}
	require.Equal(t, "5s", acquired["ttl"], "log: %s", buf.String())
}
