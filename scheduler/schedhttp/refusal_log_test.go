package schedhttp_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

// An action refused for its media type logs why: a multipart body (a
// well-formed Content-Type that is not JSON) was logged with
// "error":null; an empty POST without Content-Type is refused too (415),
// as the docs say.
func TestContentTypeRefusalLogsTheReason(t *testing.T) {
	t.Parallel()
	s, _ := newAdminScheduler(t)
	for _, tc := range []struct {
		name, contentType, body, want string
	}{
		{"Multipart", "multipart/form-data; boundary=x", "--x--\r\n", `"multipart/form-data"`},
		{"EmptyWithoutContentType", "", "", "no media type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			h, err := schedhttp.New(s, schedhttp.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			require.NoError(t, err)
			req := httptest.NewRequest("POST", "/jobs/settle/pause", strings.NewReader(tc.body))
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			require.Equal(t, http.StatusUnsupportedMediaType, rec.Code)
			var entry map[string]any
			require.NoError(t, json.Unmarshal(logs.Bytes(), &entry), logs.String())
			require.Equal(t, "admin_request_forbidden", entry["msg"])
			require.Equal(t, "content_type", entry["reason"])
			msg, ok := entry["error"].(string)
			require.True(t, ok, "the error is logged as text, not %v", entry["error"])
			require.Contains(t, msg, tc.want)
		})
	}
}
