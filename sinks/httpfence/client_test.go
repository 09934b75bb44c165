package httpfence_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/httpfencetest"
)

// hit is one request as a test server saw it.
type hit struct {
	method, key, token, owner string
	body                      []byte
}

// scripted is a test server answering its n-th request with answers[n]
// (the last answer repeats) and recording every request.
type scripted struct {
	srv  *httptest.Server
	mu   sync.Mutex
	hits []hit
}

type answer struct {
	status int
	header map[string]string
	body   string
}

func newScripted(t *testing.T, answers ...answer) *scripted {
	t.Helper()
	s := &scripted{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.hits = append(s.hits, hit{r.Method, r.Header.Get("Idempotency-Key"), r.Header.Get("Fencing-Token"), r.Header.Get("Fencing-Owner"), body})
		a := answers[min(len(s.hits), len(answers))-1]
		s.mu.Unlock()
		for k, v := range a.header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(a.status)
		_, _ = io.WriteString(w, a.body)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scripted) requests() []hit {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]hit(nil), s.hits...)
}

// sleeps records the waits of a Transport instead of waiting.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

// total is the sum of the waits so far: a fake clock's advance.
func (s *sleeps) total() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sum time.Duration
	for _, d := range s.d {
		sum += d
	}
	return sum
}

func (s *sleeps) waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

// newClient returns a client whose Transport records its waits.
func newClient(srv *httptest.Server, tr *httpfence.Transport) (*http.Client, *sleeps) {
	sl := &sleeps{}
	tr.Base = srv.Client().Transport
	if tr.Sleep == nil {
		tr.Sleep = sl.sleep
	}
	return &http.Client{Transport: tr}, sl
}

func fencedContext(key string, token fence.Token, owner string) context.Context {
	return httpfence.WithIdempotencyKey(fence.WithHolder(context.Background(), fence.Holder{Token: token, Owner: owner}), key)
}

func TestTransportSendsKeyAndFencingHeaders(t *testing.T) {
	t.Parallel()
	s := newScripted(t, answer{status: http.StatusCreated})
	client, _ := newClient(s.srv, &httpfence.Transport{})

	req, err := http.NewRequestWithContext(fencedContext(`settle:"eu"\x`, 1780000000000042, "replica-a:9f3c"), http.MethodPost, s.srv.URL, strings.NewReader("{}"))
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())

	require.Equal(t, []hit{{http.MethodPost, `"settle:\"eu\"\\x"`, "1780000000000042", `"replica-a:9f3c"`, []byte("{}")}}, s.requests())
	require.Empty(t, req.Header, "the caller's request is not modified")
}

// The holder's scope travels in Fencing-Scope as an sf-string; scope ""
// sends none (the middleware reads a missing header as ""), and a scope an
// sf-string cannot carry fails before anything is sent.
func TestTransportSendsTheScope(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var scopes [][]string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		scopes = append(scopes, r.Header.Values("Fencing-Scope"))
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &httpfence.Transport{}}
	for _, scope := range []string{`settle|tenant-a@1780000000`, `a"b\c`, ""} {
		ctx := fence.WithHolder(context.Background(), fence.Holder{Scope: scope, Token: 7, Owner: "o"})
		req, err := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL, nil)
		require.NoError(t, err)
		req.Header.Set("Fencing-Scope", `"spoofed"`)
		resp, err := client.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
	}
	require.Equal(t, [][]string{{`"settle|tenant-a@1780000000"`}, {`"a\"b\\c"`}, nil}, scopes)

	ctx := fence.WithHolder(context.Background(), fence.Holder{Scope: "t\xff", Token: 7, Owner: "o"})
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, srv.URL, nil)
	require.NoError(t, err)
	_, err = client.Do(req)
	require.ErrorIs(t, err, httpfence.ErrInvalidScope, "not UTF-8")
	require.Len(t, scopes, 3, "nothing was sent")
}

// A scope outside printable ASCII (the scheduler allows UTF-8 partition
// keys, and a lease name is any bytes but '{' and '}') travels as an RFC
// 9651 Display String, and the middleware fences by the decoded scope: the
// partition's holder is admitted and its stale predecessor refused.
func TestTransportCarriesAUnicodeScopeToTheMiddleware(t *testing.T) {
	t.Parallel()
	mw, err := httpfence.Middleware(httpfence.Options{Store: httpfencetest.NewMemoryStore(), Fence: httpfencetest.NewMemoryFence(), Verifier: testVerifier(t)})
	require.NoError(t, err)
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, _ := fence.HolderFromContext(r.Context())
		mu.Lock()
		seen = append(seen, h.Scope+" "+r.Header.Get("Fencing-Scope"))
		mu.Unlock()
	})))
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: &httpfence.Transport{Signer: testSigner(t)}}
	post := func(key string, token fence.Token) error {
		ctx := fence.WithHolder(context.Background(), fence.Holder{Scope: "settle|zürich 100%", Token: token, Owner: "o" + key})
		req, err := http.NewRequestWithContext(httpfence.WithIdempotencyKey(ctx, key), http.MethodPost, srv.URL+"/charges", nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		require.Equal(t, http.StatusOK, resp.StatusCode)
		return resp.Body.Close()
	}
	require.NoError(t, post("k1", 1780000000000900))
	err = post("k2", 1780000000000800)
	var stale *fence.StaleTokenError
	require.ErrorAs(t, err, &stale)
	require.Equal(t, "settle|zürich 100%", stale.Scope)
	require.Equal(t, fence.Token(1780000000000900), stale.Current)
	require.Equal(t, []string{`settle|zürich 100% %"settle|z%c3%bcrich 100%25"`}, seen)
}

func TestTransportKeepsAKeyAlreadyOnTheRequest(t *testing.T) {
	t.Parallel()
	s := newScripted(t, answer{status: http.StatusOK})
	client, _ := newClient(s.srv, &httpfence.Transport{})
	req, err := http.NewRequest(http.MethodPost, s.srv.URL, nil)
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", `"preset"`)
	resp, err := client.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, `"preset"`, s.requests()[0].key)
	require.Empty(t, s.requests()[0].token, "no token in the context, none sent")
}

func TestTransportRefusesKeysAnSfStringCannotCarry(t *testing.T) {
	t.Parallel()
	s := newScripted(t, answer{status: http.StatusOK})
	client, _ := newClient(s.srv, &httpfence.Transport{})
	for _, ctx := range []context.Context{
		httpfence.WithIdempotencyKey(context.Background(), "café"),
		httpfence.WithIdempotencyKey(context.Background(), ""),
		fence.WithHolder(context.Background(), fence.Holder{Token: 1, Owner: "owner\n"}),
	} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.srv.URL, strings.NewReader("x"))
		require.NoError(t, err)
		_, err = client.Do(req)
		require.Error(t, err)
		require.True(t, errors.Is(err, httpfence.ErrInvalidKey) || errors.Is(err, httpfence.ErrInvalidOwner), err)
	}
	require.Empty(t, s.requests(), "nothing was sent")
}

func TestTransportRetriesWithTheSameKeyAndBody(t *testing.T) {
	t.Parallel()
	s := newScripted(t,
		answer{status: http.StatusServiceUnavailable},
		answer{status: http.StatusTooManyRequests},
		answer{status: http.StatusConflict},
		answer{status: http.StatusCreated, body: "done"},
	)
	tr := &httpfence.Transport{MaxAttempts: 5, BaseDelay: 100 * time.Millisecond, MaxDelay: 300 * time.Millisecond}
	client, sl := newClient(s.srv, tr)

	req, err := http.NewRequestWithContext(fencedContext("op-1", 7, "a"), http.MethodPost, s.srv.URL, bytes.NewReader([]byte("payload")))
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Equal(t, "done", string(body))

	hits := s.requests()
	require.Len(t, hits, 4)
	for _, h := range hits {
		require.Equal(t, hit{http.MethodPost, `"op-1"`, "7", `"a"`, []byte("payload")}, h)
	}
	// Jittered exponential backoff: [d/2, d] for d = 100ms, 200ms, then the 300ms cap.
	waits := sl.waits()
	require.Len(t, waits, 3)
	for i, d := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond} {
		require.GreaterOrEqual(t, waits[i], d/2, "wait %d", i)
		require.LessOrEqual(t, waits[i], d, "wait %d", i)
	}
}

func TestTransportGivesUpAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	s := newScripted(t, answer{status: http.StatusBadGateway, body: "last"})
	client, sl := newClient(s.srv, &httpfence.Transport{MaxAttempts: 3})
	req, err := http.NewRequest(http.MethodGet, s.srv.URL, nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err, "the last attempt's response is returned as is")
	body, _ := io.ReadAll(resp.Body)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusBadGateway, resp.StatusCode)
	require.Equal(t, "last", string(body))
	require.Len(t, s.requests(), 3)
	require.Len(t, sl.waits(), 2)
}

func TestTransportDoesNotRetryOtherStatuses(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusOK, http.StatusBadRequest, http.StatusNotFound, http.StatusUnprocessableEntity, http.StatusPreconditionFailed} {
		s := newScripted(t, answer{status: status})
		client, _ := newClient(s.srv, &httpfence.Transport{})
		req, err := http.NewRequest(http.MethodGet, s.srv.URL, nil)
		require.NoError(t, err)
		resp, err := client.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, status, resp.StatusCode)
		require.Len(t, s.requests(), 1, "status %d", status)
	}
}

func TestTransportHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		retryAfter string
		wantWait   time.Duration // -1: no retry
	}{
		{"Seconds", "7", 7 * time.Second},
		{"HTTPDate", now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second},
		{"LongerThanMaxDelayEndsRetries", "3600", -1},
		{"DateInThePastFallsBackToBackoff", now.Add(-time.Hour).Format(http.TimeFormat), time.Millisecond},
		{"GarbageFallsBackToBackoff", "soon", time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newScripted(t,
				answer{status: http.StatusServiceUnavailable, header: map[string]string{"Retry-After": tc.retryAfter}},
				answer{status: http.StatusOK},
			)
			client, sl := newClient(s.srv, &httpfence.Transport{
				BaseDelay: time.Millisecond, MaxDelay: time.Minute,
				Now: func() time.Time { return now },
			})
			req, err := http.NewRequestWithContext(httpfence.WithIdempotencyKey(context.Background(), "k"), http.MethodPost, s.srv.URL, strings.NewReader("x"))
			require.NoError(t, err)
			resp, err := client.Do(req)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			if tc.wantWait < 0 {
				require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
				require.Len(t, s.requests(), 1)
				require.Empty(t, sl.waits())
				return
			}
			require.Equal(t, http.StatusOK, resp.StatusCode)
			require.Len(t, s.requests(), 2)
			waits := sl.waits()
			require.Len(t, waits, 1)
			if tc.wantWait == time.Millisecond { // the jittered backoff, not the header
				require.LessOrEqual(t, waits[0], time.Millisecond)
				return
			}
			require.Equal(t, tc.wantWait, waits[0])
		})
	}
}

func TestTransportNeverResendsWhatItCannot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		method   string
		key      bool
		body     io.Reader
		wantHits int
	}{
		{"PostWithoutKey", http.MethodPost, false, strings.NewReader("x"), 1},
		{"PatchWithoutKey", http.MethodPatch, false, strings.NewReader("x"), 1},
		{"PostWithKey", http.MethodPost, true, strings.NewReader("x"), 3},
		{"PostWithKeyAndNoBody", http.MethodPost, true, nil, 3},
		{"PostWithKeyButUnrewindableBody", http.MethodPost, true, struct{ io.Reader }{strings.NewReader("x")}, 1},
		{"GetWithoutKey", http.MethodGet, false, nil, 3},
		{"PutWithoutKey", http.MethodPut, false, strings.NewReader("x"), 3},
		{"DeleteWithoutKey", http.MethodDelete, false, nil, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newScripted(t, answer{status: http.StatusServiceUnavailable})
			client, _ := newClient(s.srv, &httpfence.Transport{MaxAttempts: 3})
			ctx := context.Background()
			if tc.key {
				ctx = httpfence.WithIdempotencyKey(ctx, "k")
			}
			req, err := http.NewRequestWithContext(ctx, tc.method, s.srv.URL, tc.body)
			require.NoError(t, err)
			resp, err := client.Do(req)
			require.NoError(t, err)
			require.NoError(t, resp.Body.Close())
			require.Len(t, s.requests(), tc.wantHits)
		})
	}
}

// roundTripFunc adapts a function to http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestTransportRetriesNetworkErrors(t *testing.T) {
	t.Parallel()
	s := newScripted(t, answer{status: http.StatusOK, body: "ok"})
	var (
		mu    sync.Mutex
		calls int
	)
	base := s.srv.Client().Transport
	sl := &sleeps{}
	client := &http.Client{Transport: &httpfence.Transport{
		Sleep: sl.sleep,
		Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			calls++
			n := calls
			mu.Unlock()
			if n == 1 {
				_ = r.Body.Close()
				return nil, errors.New("connection reset by peer")
			}
			return base.RoundTrip(r)
		}),
	}}
	req, err := http.NewRequestWithContext(httpfence.WithIdempotencyKey(context.Background(), "k"), http.MethodPost, s.srv.URL, strings.NewReader("body"))
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, []hit{{http.MethodPost, `"k"`, "", "", []byte("body")}}, s.requests(), "the resent body is whole")
	require.Len(t, sl.waits(), 1)
}

func TestTransportStopsWaitingWhenTheContextEnds(t *testing.T) {
	t.Parallel()
	s := newScripted(t, answer{status: http.StatusServiceUnavailable, header: map[string]string{"Retry-After": "3600"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base := s.srv.Client().Transport
	// The real timer: an hour-long wait that only the cancellation, made
	// once the first answer is in, can end.
	client := &http.Client{Transport: &httpfence.Transport{
		MaxDelay: 2 * time.Hour,
		Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := base.RoundTrip(r)
			cancel()
			return resp, err
		}),
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.srv.URL, nil)
	require.NoError(t, err)
	_, err = client.Do(req)
	require.ErrorIs(t, err, context.Canceled)
	require.Contains(t, err.Error(), "503", "the last attempt's outcome is joined")
	require.Len(t, s.requests(), 1)
}

func TestTransportMapsStaleTokenToError(t *testing.T) {
	t.Parallel()
	handler, err := httpfence.Middleware(httpfence.Options{
		Store:    httpfencetest.NewMemoryStore(),
		Fence:    httpfencetest.NewMemoryFence(),
		Verifier: testVerifier(t),
	})
	require.NoError(t, err)
	srv := httptest.NewServer(handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})))
	t.Cleanup(srv.Close)
	client, sl := newClient(srv, &httpfence.Transport{Signer: testSigner(t)})

	post := func(key string, token fence.Token, owner string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(fencedContext(key, token, owner), http.MethodPost, srv.URL+"/settlements/2026-03-08", strings.NewReader("{}"))
		require.NoError(t, err)
		return client.Do(req)
	}
	resp, err := post("k1", 10, "b")
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	resp, err = post("k2", 9, "a")
	require.Nil(t, resp)
	var urlErr *url.Error
	require.ErrorAs(t, err, &urlErr, "http.Client wraps the RoundTrip error")
	require.ErrorIs(t, err, fence.ErrStaleToken)
	var stale *fence.StaleTokenError
	require.ErrorAs(t, err, &stale)
	require.Equal(t, fence.StaleTokenError{Resource: "/settlements/2026-03-08", Presented: 9, Current: 10}, *stale)
	require.Empty(t, sl.waits(), "a stale token is never retried")
}

func TestTransportReturnsOther412sAsResponses(t *testing.T) {
	t.Parallel()
	body := `{"type":"https://example.com/problems/etag-mismatch","title":"x","status":412}`
	s := newScripted(t, answer{status: http.StatusPreconditionFailed, header: map[string]string{"Content-Type": "application/problem+json"}, body: body})
	client, _ := newClient(s.srv, &httpfence.Transport{})
	resp, err := client.Get(s.srv.URL)
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusPreconditionFailed, resp.StatusCode)
	require.Equal(t, body, string(got), "the peeked body is given back whole")
}

// inFlight is the middleware's in-flight answer, the lock ending in secs.
func inFlight(secs string) answer {
	return answer{
		status: http.StatusConflict,
		header: map[string]string{"Content-Type": "application/problem+json", "Retry-After": secs},
		body:   `{"type":"https://holdfast.dev/problems/request-in-flight","title":"A request with this Idempotency-Key is in progress","status":409}`,
	}
}

// A key in flight is answered 409 with the lock's remaining time: the
// Transport polls (a backoff from BaseDelay, doubling, each a draw between
// half and all of it) and those answers are not attempts (MaxAttempts 2
// here, 3 in-flight answers before the success).
func TestTransportWaitsOutAnInFlightKey(t *testing.T) {
	t.Parallel()
	s := newScripted(t, inFlight("37"), inFlight("37"), inFlight("2"), answer{status: http.StatusCreated, body: "done"})
	client, sl := newClient(s.srv, &httpfence.Transport{MaxAttempts: 2})

	req, err := http.NewRequestWithContext(fencedContext("op-1", 7, "a"), http.MethodPost, s.srv.URL, strings.NewReader("payload"))
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	hits := s.requests()
	require.Len(t, hits, 4)
	for _, h := range hits {
		require.Equal(t, hit{http.MethodPost, `"op-1"`, "7", `"a"`, []byte("payload")}, h, "every send with the same key and the whole body")
	}
	waits := sl.waits()
	require.Len(t, waits, 3)
	for i, w := range waits {
		d := docBaseDelay << i
		require.True(t, w >= d/2 && w <= d, "poll %d waited %v, want within [%v, %v]", i+1, w, d/2, d)
	}
}

// TestTransportPollsAConcurrentDuplicate is the trial's case (4 requests
// with one key: the duplicates waited the lock's whole 60 s): the
// duplicate's first send meets the original in flight (Retry-After: 60);
// the original completes meanwhile, and the duplicate gets the answer on
// its first poll, after at most BaseDelay (100 ms), not 60 s.
func TestTransportPollsAConcurrentDuplicate(t *testing.T) {
	t.Parallel()
	s := newScripted(t, inFlight("60"), answer{status: http.StatusCreated, body: "done"})
	client, sl := newClient(s.srv, &httpfence.Transport{})
	req, err := http.NewRequestWithContext(fencedContext("op-1", 7, "a"), http.MethodPost, s.srv.URL, strings.NewReader("payload"))
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	require.Len(t, s.requests(), 2)
	waits := sl.waits()
	require.Len(t, waits, 1, "one poll")
	require.LessOrEqual(t, waits[0], docBaseDelay, "the first poll comes after BaseDelay at most, not the lock's 60 s")
	require.GreaterOrEqual(t, waits[0], docBaseDelay/2)
}

// TestTransportRetryAfterBoundsAPoll: the server's Retry-After is the
// upper bound of each poll's wait (a lock ending in 1 s is polled after
// 1 s, not after a longer backoff), and polls stay within MaxDelay.
func TestTransportRetryAfterBoundsAPoll(t *testing.T) {
	t.Parallel()
	s := newScripted(t, inFlight("1"), inFlight("600"), answer{status: http.StatusCreated})
	client, sl := newClient(s.srv, &httpfence.Transport{BaseDelay: 8 * time.Second, MaxDelay: 5 * time.Second, MaxInFlightWait: 20 * time.Minute})
	req, err := http.NewRequestWithContext(fencedContext("op-1", 7, "a"), http.MethodPost, s.srv.URL, strings.NewReader("payload"))
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	waits := sl.waits()
	require.Len(t, waits, 2)
	require.Equal(t, time.Second, waits[0], "Retry-After 1 s bounds the backoff")
	require.True(t, waits[1] >= 2500*time.Millisecond && waits[1] <= 5*time.Second, "capped by MaxDelay: %v", waits[1])
}

// An in-flight answer the Transport does not wait out (its polls past
// MaxInFlightWait in all, or past the request's deadline) ends RoundTrip
// with an *InFlightError carrying the server's Retry-After, for the
// caller's own retry (the scheduler's deferral). The clock advances by
// the waits.
func TestTransportReturnsInFlightErrorItDoesNotWaitOut(t *testing.T) {
	t.Parallel()
	now := time.Now() // the deadline below must lie ahead for the client too
	for _, tc := range []struct {
		name    string
		tr      httpfence.Transport
		timeout time.Duration // on the Transport's clock; 0: none
		bound   time.Duration // the waits' sum stays within; 0: no wait
	}{
		{name: "PastMaxInFlightWait", tr: httpfence.Transport{MaxInFlightWait: 100 * time.Second}, bound: 100 * time.Second},
		{name: "NoWaitAtAll", tr: httpfence.Transport{MaxInFlightWait: -1}},
		{name: "PastTheDeadline", tr: httpfence.Transport{}, timeout: 30 * time.Second, bound: 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newScripted(t, inFlight("45"))
			var sl *sleeps
			tc.tr.Now = func() time.Time { return now.Add(sl.total()) }
			var client *http.Client
			client, sl = newClient(s.srv, &tc.tr)
			ctx := fencedContext("op-1", 7, "a")
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, now.Add(tc.timeout))
				defer cancel()
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.srv.URL, strings.NewReader("payload"))
			require.NoError(t, err)
			resp, err := client.Do(req)
			require.Nil(t, resp)
			require.ErrorIs(t, err, httpfence.ErrInFlight)
			var inFlight *httpfence.InFlightError
			require.ErrorAs(t, err, &inFlight)
			require.Equal(t, 45*time.Second, inFlight.Wait)
			var deferral interface{ RetryAfter() time.Duration }
			require.ErrorAs(t, err, &deferral, "the scheduler's deferral interface")
			require.Equal(t, 45*time.Second, deferral.RetryAfter())
			waits := sl.waits()
			require.Len(t, s.requests(), len(waits)+1, "a send after each wait")
			if tc.bound == 0 {
				require.Empty(t, waits)
				return
			}
			require.LessOrEqual(t, sl.total(), tc.bound, "the polls stay within the bound")
			require.Greater(t, sl.total(), tc.bound-docMaxDelay, "and poll until the next wait would pass it")
			for _, w := range waits {
				require.LessOrEqual(t, w, docMaxDelay)
			}
		})
	}
}

// A request under a slot scope its service's fence closed
// (PruneSlotScopes) reaches the client as a stale token that says so:
// the problem carries closedBefore, and the error matches
// fence.ErrScopeClosed. With Options.Identity, the fence sees the
// resource as FenceResource names it, and is pruned under that name.
func TestTransportMapsAClosedSlotScope(t *testing.T) {
	t.Parallel()
	fs := httpfencetest.NewMemoryFence()
	handler, err := httpfence.Middleware(httpfence.Options{
		Store:    httpfencetest.NewMemoryStore(),
		Fence:    fs,
		Verifier: testVerifier(t),
		Identity: func(*http.Request) string { return "tenant-1" },
	})
	require.NoError(t, err)
	srv := httptest.NewServer(handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	})))
	t.Cleanup(srv.Close)
	client, _ := newClient(srv, &httpfence.Transport{Signer: testSigner(t)})
	const scope = "invoice|eu@1780000000"
	post := func(key string, token fence.Token) (*http.Response, error) {
		ctx := httpfence.WithIdempotencyKey(fence.WithHolder(context.Background(), fence.Holder{Scope: scope, Token: token, Owner: "a"}), key)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/charges", strings.NewReader("{}"))
		require.NoError(t, err)
		return client.Do(req)
	}
	resp, err := post("k1", 10)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	n, err := fs.PruneSlotScopes(t.Context(), "/charges", "invoice|eu", time.Unix(1780000001, 0))
	require.NoError(t, err)
	require.Zero(t, n, "the fence does not know the resource by its path alone")
	n, err = fs.PruneSlotScopes(t.Context(), httpfence.FenceResource("tenant-1", "/charges"), "invoice|eu", time.Unix(1780000001, 0))
	require.NoError(t, err)
	require.Equal(t, 1, n)

	resp, err = post("k2", 11)
	require.Nil(t, resp)
	require.ErrorIs(t, err, fence.ErrStaleToken)
	require.ErrorIs(t, err, fence.ErrScopeClosed)
	var stale *fence.StaleTokenError
	require.ErrorAs(t, err, &stale)
	require.Equal(t, fence.StaleTokenError{Resource: "/charges", Scope: scope, Presented: 11, ClosedBefore: time.Unix(1780000001, 0).UTC()}, *stale)
}

// A password in the request's URL never reaches an error (found by a fresh
// user's trial: InFlightError's text and the span's status held it, where
// net/http's own *url.Error masks it): InFlightError.URL and a
// StaleTokenError's Resource are url.URL.Redacted. Control: URL.String()
// fails it.
func TestErrorsMaskTheURLsPassword(t *testing.T) {
	t.Parallel()
	stale := answer{status: http.StatusPreconditionFailed, header: map[string]string{"Content-Type": "application/problem+json"},
		body: `{"type":"https://holdfast.dev/problems/stale-fencing-token","title":"Stale fencing token","status":412,"currentToken":9,"presentedToken":7}`}
	for name, a := range map[string]answer{"InFlight": inFlight("45"), "Stale": stale} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := newScripted(t, a)
			client, _ := newClient(s.srv, &httpfence.Transport{MaxInFlightWait: -1})
			u, err := url.Parse(s.srv.URL)
			require.NoError(t, err)
			u.User = url.UserPassword("svc", "S3cretPassw0rd")
			req, err := http.NewRequestWithContext(fencedContext("op-1", 7, "a"), http.MethodPost, u.String(), strings.NewReader("payload"))
			require.NoError(t, err)
			resp, err := client.Do(req)
			require.Nil(t, resp)
			require.Error(t, err)
			require.NotContains(t, err.Error(), "S3cretPassw0rd")
			require.Contains(t, err.Error(), "svc:xxxxx@")
			var inFlight *httpfence.InFlightError
			if errors.As(err, &inFlight) {
				require.NotContains(t, inFlight.URL, "S3cretPassw0rd")
			}
			var se *fence.StaleTokenError
			if errors.As(err, &se) {
				require.NotContains(t, se.Resource, "S3cretPassw0rd")
			}
			require.True(t, inFlight != nil || se != nil, "one of the two errors: %v", err)
		})
	}
}

// Every send is an attempt: net/http resends a request with an
// Idempotency-Key on its own when a reused connection closes before the
// answer, which ran a handler that released its key (it aborted) once
// more than MaxAttempts allows (a fresh user's trial: 2 runs with
// MaxAttempts 1). Base gets the request with a GetBody that refuses, and
// the headers as they were (a Base that reads the key with Header.Get, or
// serves the request in process, finds it).
func TestTransportSendsEachAttemptOnce(t *testing.T) {
	t.Parallel()
	mw, err := httpfence.Middleware(httpfence.Options{Store: httpfencetest.NewMemoryStore()})
	require.NoError(t, err)
	var (
		mu   sync.Mutex
		runs = map[string]int{}
	)
	srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		runs[r.URL.Path]++
		mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/abort") {
			panic(http.ErrAbortHandler) // after its effect: the key is released, the connection closed
		}
		w.WriteHeader(http.StatusCreated)
	})))
	t.Cleanup(srv.Close)
	send := func(maxAttempts int, path, key string) {
		t.Helper()
		client := &http.Client{Transport: &httpfence.Transport{MaxAttempts: maxAttempts, Base: srv.Client().Transport, Sleep: (&sleeps{}).sleep}}
		req, err := http.NewRequestWithContext(httpfence.WithIdempotencyKey(t.Context(), key), http.MethodPost, srv.URL+path, strings.NewReader("b"))
		require.NoError(t, err)
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			require.NoError(t, resp.Body.Close())
		}
	}
	for _, attempts := range []int{1, 2} {
		send(attempts, "/ok", fmt.Sprint("warm-", attempts)) // a connection to reuse
		send(attempts, fmt.Sprint("/abort-", attempts), fmt.Sprint("abort-", attempts))
	}
	mu.Lock()
	require.Equal(t, map[string]int{"/ok": 2, "/abort-1": 1, "/abort-2": 2}, runs, "one handler run per attempt")
	mu.Unlock()

	// A Base that serves the request in process sees the key as sent.
	inProcess := &http.Client{Transport: &httpfence.Transport{MaxAttempts: 1, Base: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		_, err := r.GetBody()
		require.Error(t, err, "net/http may not rewind the body to send it again")
		require.Equal(t, `"in-process"`, r.Header.Get("Idempotency-Key"))
		rec := httptest.NewRecorder()
		srv.Config.Handler.ServeHTTP(rec, r)
		return rec.Result(), nil
	})}}
	req, err := http.NewRequestWithContext(httpfence.WithIdempotencyKey(t.Context(), "in-process"), http.MethodPost, srv.URL+"/ok", strings.NewReader("b"))
	require.NoError(t, err)
	resp, err := inProcess.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusCreated, resp.StatusCode)
}
