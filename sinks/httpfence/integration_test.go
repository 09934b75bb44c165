package httpfence_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
)

// TestConcurrentRequestsWithOneKeyRunTheHandlerOnce: 64 requests with one
// key at once; the handler runs once, every other request gets 409 or the
// replay of the one answer. The handler is held until the first 409, so
// every backend goes through the in-flight path.
func TestConcurrentRequestsWithOneKeyRunTheHandlerOnce(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s stores) {
		f := newFixture(t, s, nil)
		const n = 64
		c := call{path: "/hold", body: `{"amount":100}`, key: `"once"`, token: "7", owner: `"a"`}
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			mu      sync.Mutex
			answers []answerOf
		)
		for range n {
			wg.Go(func() {
				<-start
				a := f.do(t, c)
				if a.status == http.StatusConflict {
					f.unblock()
				}
				mu.Lock()
				answers = append(answers, a)
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()

		require.EqualValues(t, 1, f.runs.Load(), "the handler ran once")
		var (
			original  *answerOf
			conflicts int
		)
		for i, a := range answers {
			switch a.status {
			case http.StatusConflict:
				conflicts++
				require.Equal(t, problems+"request-in-flight", problemOf(t, a).Type)
			case http.StatusCreated:
				if original == nil {
					original = &answers[i]
				}
				require.Equal(t, *original, a, "every 201 is the same answer")
			default:
				t.Fatalf("status %d: %s", a.status, a.body)
			}
		}
		require.NotNil(t, original, "the request that ran got its answer")
		require.JSONEq(t, `{"run":1,"body":"{\"amount\":100}","token":7,"owner":"a"}`, string(original.body))
		require.Positive(t, conflicts)
		require.Equal(t, *original, f.do(t, c), "afterwards, the key replays")
		t.Logf("%d conflicts, %d replays", conflicts, n-1-conflicts)
	})
}

// TestRetryAfterConnectionResetReplaysTheCommittedAnswer: the server runs
// the handler and stores its answer, then drops the connection without
// answering. The client's Transport retries with the same key and gets the
// stored answer, byte for byte; the effect happened once.
func TestRetryAfterConnectionResetReplaysTheCommittedAnswer(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s stores) {
		var (
			dropped  atomic.Bool
			hits     atomic.Int64
			recorded *httptest.ResponseRecorder
		)
		resetFirst := func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				if dropped.CompareAndSwap(false, true) {
					recorded = httptest.NewRecorder()
					next.ServeHTTP(recorded, r) // the handler runs, the answer is stored
					conn, _, err := http.NewResponseController(w).Hijack()
					if err != nil {
						t.Errorf("hijack: %v", err)
						return
					}
					_ = conn.Close() // ... and the client never sees it
					return
				}
				next.ServeHTTP(w, r)
			})
		}
		f := newFixture(t, s, nil, resetFirst)

		sl := &sleeps{}
		client := &http.Client{Transport: &httpfence.Transport{Base: f.srv.Client().Transport, Sleep: sl.sleep}}
		ctx := httpfence.WithIdempotencyKey(fence.WithHolder(context.Background(), fence.Holder{Token: 1780000000000001, Owner: "replica-a"}), "settle:2026-03-08T02:00:00Z:eu")
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL+"/settle", strings.NewReader(`{"total":1250}`))
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())

		require.EqualValues(t, 1, f.runs.Load(), "exactly one effect")
		require.EqualValues(t, 2, hits.Load(), "the first attempt and one retry")
		require.Len(t, sl.waits(), 1, "the Transport retried the network error")
		require.Equal(t, recorded.Code, resp.StatusCode)
		require.Equal(t, recorded.Body.Bytes(), body, "the replayed body is byte-identical")
		for k, v := range recorded.Header() {
			require.Equal(t, v, resp.Header[k], "header %s", k)
		}
		require.JSONEq(t, `{"run":1,"body":"{\"total\":1250}","token":1780000000000001,"owner":"replica-a"}`, string(body))
	})
}
