package logattr_test

import (
	"bytes"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdfast-go/holdfast/internal/logattr"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDurationLogsTheDurationString(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	log.Info("x", logattr.Duration("ttl", 5*time.Second), logattr.Duration("took", 1500*time.Microsecond))
	require.Contains(t, buf.String(), `"ttl":"5s","took":"1.5ms"`)
}
