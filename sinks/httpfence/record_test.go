package httpfence_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/httpfencetest"
)

// goneClient is a ResponseWriter whose client went away after taking
// accept body bytes: every later write fails, as net/http's does with a
// broken pipe.
type goneClient struct {
	*httptest.ResponseRecorder
	accept int
}

func (g *goneClient) Write(p []byte) (int, error) {
	n := min(len(p), g.accept)
	g.accept -= n
	g.ResponseRecorder.Write(p[:n])
	if n < len(p) {
		return n, errors.New("write: broken pipe")
	}
	return n, nil
}

func postWithKey(key string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/settle", strings.NewReader("x"))
	r.Header.Set("Idempotency-Key", key)
	return r
}

// A client that goes away while the response is written must not leave a
// cut body for its retry (found by a fresh user's trial: the bytes the
// client took were stored as the completed response and replayed for
// 24 h). A handler that writes its whole declared body is stored whole; one
// that stops at the failed write (io.Copy) cannot be told from a whole one
// without a Content-Length, and is stored as 410 response-not-retained:
// processed, not run again, and never a cut body. Control: the recorder
// that kept the bytes the client took fails the first case.
func TestClientGoneMidResponse(t *testing.T) {
	t.Parallel()
	body := bytes.Repeat([]byte("0123456789"), 20_000) // 200 KB
	for _, tc := range []struct {
		name          string
		declareLength bool
		stopAtError   bool
		wantStatus    int
	}{
		{"WholeDeclaredBodyIsReplayed", true, false, http.StatusCreated},
		{"BodyCutByTheHandlerIsNotRetained", false, true, http.StatusGone},
		{"UndeclaredLengthIsNotRetained", false, false, http.StatusGone},
		{"DeclaredBodyCutByTheHandlerIsNotRetained", true, true, http.StatusGone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mw, err := httpfence.Middleware(httpfence.Options{Store: httpfencetest.NewMemoryStore()})
			require.NoError(t, err)
			var runs atomic.Int64
			h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				runs.Add(1)
				if tc.declareLength {
					w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				}
				w.WriteHeader(http.StatusCreated)
				for chunk := range slicesChunk(body, 10_000) {
					if _, err := w.Write(chunk); err != nil && tc.stopAtError {
						return
					}
				}
			}))
			gone := &goneClient{ResponseRecorder: httptest.NewRecorder(), accept: 3975}
			h.ServeHTTP(gone, postWithKey(`"k"`))
			require.Equal(t, http.StatusCreated, gone.Code)
			require.Equal(t, 3975, gone.Body.Len(), "the first client took part of it")

			retry := httptest.NewRecorder()
			h.ServeHTTP(retry, postWithKey(`"k"`))
			require.EqualValues(t, 1, runs.Load(), "the retry does not run the handler again")
			require.Equal(t, tc.wantStatus, retry.Code)
			if tc.wantStatus == http.StatusCreated {
				require.Equal(t, body, retry.Body.Bytes(), "the whole response")
				return
			}
			require.Contains(t, retry.Body.String(), "response-not-retained")
			require.Contains(t, retry.Body.String(), "did not reach the client in full")
		})
	}
}

// slicesChunk yields p in pieces of n bytes.
func slicesChunk(p []byte, n int) func(func([]byte) bool) {
	return func(yield func([]byte) bool) {
		for len(p) > 0 {
			k := min(n, len(p))
			if !yield(p[:k]) {
				return
			}
			p = p[k:]
		}
	}
}

// A handler that takes the connection over (http.Hijacker: a WebSocket
// upgrade) answers on it itself: nothing is stored, and a retry runs the
// handler again (found by a fresh user's trial: an empty 200 was stored
// and replayed). Control: without the recorder's Hijack the retry gets
// that 200.
func TestHijackedConnectionIsNotStored(t *testing.T) {
	t.Parallel()
	mw, err := httpfence.Middleware(httpfence.Options{Store: httpfencetest.NewMemoryStore()})
	require.NoError(t, err)
	var runs atomic.Int64
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		runs.Add(1)
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer conn.Close()
		_, _ = rw.WriteString("HTTP/1.1 202 Accepted\r\nContent-Length: 8\r\nConnection: close\r\n\r\nhijacked")
		_ = rw.Flush()
	})))
	defer srv.Close()
	send := func() (int, string) {
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("x"))
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", `"k"`)
		resp, err := srv.Client().Do(req)
		require.NoError(t, err)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return resp.StatusCode, string(b)
	}
	status, body := send()
	require.Equal(t, http.StatusAccepted, status)
	require.Equal(t, "hijacked", body)
	// The client has the answer before the handler returns and the key is
	// released: until then a retry is answered 409 in flight.
	testwait.Until(t, 10*time.Second, "the retry runs the handler", func() bool {
		status, body = send()
		return status != http.StatusConflict
	})
	require.Equal(t, http.StatusAccepted, status, "the retry")
	require.Equal(t, "hijacked", body, "the retry")
	require.EqualValues(t, 2, runs.Load(), "the retry ran the handler")
}

// A replay repeats the handler's header fields, not those a middleware
// around this one set for the first request (a request id, a session
// cookie): those are set again for the request replayed to (found by a
// fresh user's trial: bob's replay carried alice's Set-Cookie). Control:
// storing every field of the writer's header fails it.
func TestReplayRepeatsTheHandlersHeaderFieldsOnly(t *testing.T) {
	t.Parallel()
	mw, err := httpfence.Middleware(httpfence.Options{Store: httpfencetest.NewMemoryStore()})
	require.NoError(t, err)
	inner := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Location", "/settlements/7")
		w.Header().Set("X-Trace", "handler") // replaces the outer value
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":7}`)
	}))
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		caller := r.Header.Get("X-Caller")
		w.Header().Set("Set-Cookie", "session="+caller)
		w.Header().Set("X-Request-Id", caller)
		w.Header().Set("X-Trace", "outer")
		inner.ServeHTTP(w, r)
	})
	for _, caller := range []string{"alice", "bob"} {
		r := postWithKey(`"k"`)
		r.Header.Set("X-Caller", caller)
		rec := httptest.NewRecorder()
		outer.ServeHTTP(rec, r)
		require.Equal(t, http.StatusCreated, rec.Code, caller)
		require.Equal(t, `{"id":7}`, rec.Body.String(), caller)
		require.Equal(t, "session="+caller, rec.Header().Get("Set-Cookie"), caller)
		require.Equal(t, caller, rec.Header().Get("X-Request-Id"), caller)
		require.Equal(t, "/settlements/7", rec.Header().Get("Location"), caller)
		require.Equal(t, "handler", rec.Header().Get("X-Trace"), caller)
	}
}
