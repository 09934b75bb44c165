package scheduler_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/httpfencetest"
)

// inFlight is an error as httpfence.InFlightError is: the downstream still
// holds the request's idempotency key (a crash of it mid-request left the
// key locked), come back after wait.
type inFlight struct{ wait time.Duration }

func (e *inFlight) Error() string {
	return fmt.Sprintf("downstream: key in flight, retry after %v", e.wait)
}
func (e *inFlight) RetryAfter() time.Duration { return e.wait }

// deferring is a job function whose attempts return errs[attempt-1] (nil
// past the end), recording when each attempt ran.
type deferring struct {
	errs []error
	mu   sync.Mutex
	at   []time.Time
	now  func() time.Time
}

func (d *deferring) run(_ context.Context, run scheduler.Run) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.at = append(d.at, d.now())
	if run.Attempt <= len(d.errs) {
		return d.errs[run.Attempt-1]
	}
	return nil
}

func (d *deferring) started() []time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]time.Time(nil), d.at...)
}

// A downstream that crashed mid-request answers "in flight, come back in
// 45 s" until its lock ends: the attempts it defers are retried at the
// time it names, stored in the ledger, and do not use up MaxAttempts (1
// here): the slot succeeds on its third attempt.
func TestDeferredAttemptsDoNotUseUpMaxAttempts(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(9, 59, 58), func(t *testing.T, r *rig) {
		d := &deferring{now: r.clk.Now, errs: []error{
			scheduler.RetryAfter(errors.New("downstream: 409 Conflict"), 45*time.Second),
			fmt.Errorf("post settlement: %w", &inFlight{wait: 20 * time.Second}),
		}}
		r.replica(0, scheduler.Job{Name: "settle", Spec: "0 * * * *", MaxAttempts: 1, Run: d.run})
		r.tick(5*time.Second, time.Second) // 10:00:00: attempt 1, deferred to 10:00:45
		rec := r.record("settle", utc(10, 0, 0))
		require.Equal(t, ledger.StatusFailed, rec.Status)
		require.Equal(t, ledger.ClassDeferred, rec.Attempts[0].Class)
		require.Equal(t, "downstream: 409 Conflict", rec.Attempts[0].Error)
		require.Equal(t, utc(10, 0, 45).Add(time.Millisecond), rec.RetryAt.UTC(), "the deferral's time is stored with it")

		r.tick(2*time.Minute, time.Second)
		rec = r.record("settle", utc(10, 0, 0))
		require.Equal(t, ledger.StatusSucceeded, rec.Status, "MaxAttempts 1, yet two deferrals and a success")
		require.Equal(t, 3, rec.Attempt)
		require.Equal(t, ledger.ClassDeferred, rec.Attempts[1].Class)
		started := d.started()
		require.Len(t, started, 3)
		require.False(t, started[1].Before(utc(10, 0, 45)), "attempt 2 at %v, before the downstream's Retry-After", started[1])
		require.False(t, started[2].Before(started[1].Add(20*time.Second)), "attempt 3 at %v", started[2])
	})
}

// Deferrals are bounded: after MaxDeferrals in a row, an attempt that
// defers again counts as a retryable failure, so a downstream that never
// frees its key cannot hold a slot open for ever.
func TestDeferralsInARowAreBounded(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(9, 59, 58), func(t *testing.T, r *rig) {
		always := &inFlight{wait: 10 * time.Second}
		d := &deferring{now: r.clk.Now, errs: []error{always, always, always, always, always}}
		r.replica(0, scheduler.Job{Name: "stuck", Spec: "0 * * * *", MaxAttempts: 1, MaxDeferrals: 2, Run: d.run})
		r.tick(2*time.Minute, time.Second)
		rec := r.record("stuck", utc(10, 0, 0))
		require.Equal(t, ledger.StatusFailed, rec.Status)
		require.True(t, rec.RetryAt.IsZero(), "the failure is final")
		require.Equal(t, 3, rec.Attempt, "two deferrals, then a counted failure")
		var classes []ledger.ErrorClass
		for _, a := range rec.Attempts {
			classes = append(classes, a.Class)
		}
		require.Equal(t, []ledger.ErrorClass{ledger.ClassDeferred, ledger.ClassDeferred, ledger.ClassRetryable}, classes)
	})
}

// downstreamKey is the signing key the jobs and the downstream share.
var downstreamKey = httpfence.Key{ID: "test", Secret: []byte("0123456789abcdef0123456789abcdef")}

// crashingDownstream is a service behind httpfence.Middleware whose first
// request "crashes" mid-handler: the handler stays blocked (its key locked
// for LockTTL, as a killed process leaves it) and the client's connection
// is dropped. release lets that handler finish, as a lock's end would let
// a retry through.
type crashingDownstream struct {
	srv     *httptest.Server
	runs    atomic.Int64
	first   atomic.Bool
	release chan struct{}
	once    sync.Once
}

func newCrashingDownstream(t *testing.T, lockTTL time.Duration) *crashingDownstream {
	t.Helper()
	d := &crashingDownstream{release: make(chan struct{})}
	entered, done := make(chan struct{}), make(chan struct{})
	// The run's ctx carries its holder, so the Transport sends fencing
	// headers: the middleware admits them signed (the documented setup).
	verifier, err := httpfence.NewVerifier(downstreamKey)
	require.NoError(t, err)
	mw, err := httpfence.Middleware(httpfence.Options{Store: httpfencetest.NewMemoryStore(), LockTTL: lockTTL, Verifier: verifier})
	require.NoError(t, err)
	h := mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.runs.Add(1) == 1 {
			close(entered)
			<-d.release
		}
		w.WriteHeader(http.StatusCreated)
	}))
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.first.Swap(true) {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("downstream: read body: %v", err)
		}
		r2 := r.Clone(context.WithoutCancel(r.Context()))
		r2.Body = io.NopCloser(bytes.NewReader(body))
		go func() {
			defer close(done)
			h.ServeHTTP(httptest.NewRecorder(), r2)
		}()
		<-entered // the key is locked
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Errorf("downstream: hijack: %v", err)
			return
		}
		_ = conn.Close() // the client sees the crash
	}))
	t.Cleanup(func() {
		d.unblock()
		if d.first.Load() {
			<-done
		}
		d.srv.Close()
	})
	return d
}

func (d *crashingDownstream) unblock() { d.once.Do(func() { close(d.release) }) }

// The job's first attempt meets a real downstream crash: its connection
// dropped, then the middleware's in-flight answer (Retry-After: 45, the
// lock's remaining time), which the Transport (MaxInFlightWait -1) returns
// as an *httpfence.InFlightError. The scheduler defers the attempt 45 s
// without using up MaxAttempts (1), and the slot succeeds on attempt 2,
// the handler having run once.
func TestInFlightDownstreamDefersTheSlot(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(9, 59, 58), func(t *testing.T, r *rig) {
		down := newCrashingDownstream(t, 45*time.Second)
		signer, err := httpfence.NewSigner(downstreamKey)
		require.NoError(t, err)
		client := &http.Client{Transport: &httpfence.Transport{
			Base: down.srv.Client().Transport, MaxInFlightWait: -1, Signer: signer,
			Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
		}}
		settle := func(ctx context.Context, run scheduler.Run) error {
			req, err := http.NewRequestWithContext(httpfence.WithIdempotencyKey(ctx, run.IdempotencyKey),
				http.MethodPost, down.srv.URL+"/settle", strings.NewReader(`{"amount":100}`))
			if err != nil {
				return err
			}
			resp, err := client.Do(req)
			if err != nil {
				return fmt.Errorf("settle: %w", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				return fmt.Errorf("settle: %s", resp.Status)
			}
			return nil
		}
		r.replica(0, scheduler.Job{Name: "settle", Spec: "0 * * * *", MaxAttempts: 1, Run: settle})
		r.tick(5*time.Second, time.Second) // 10:00:00: attempt 1 meets the crash
		rec := r.record("settle", utc(10, 0, 0))
		require.Equal(t, ledger.StatusFailed, rec.Status)
		a, _ := rec.Latest()
		require.Equal(t, ledger.ClassDeferred, a.Class, "error %q", a.Error)
		require.Contains(t, a.Error, "in flight at the server; retry after 45s")
		require.Equal(t, utc(10, 0, 45).Add(time.Millisecond), rec.RetryAt.UTC())

		down.unblock() // the lock ends: the handler of the crashed request is done
		r.tick(time.Minute, time.Second)
		rec = r.record("settle", utc(10, 0, 0))
		require.Equal(t, ledger.StatusSucceeded, rec.Status)
		require.Equal(t, 2, rec.Attempt, "one deferral and a success under MaxAttempts 1")
		require.Equal(t, int64(1), down.runs.Load(), "the handler ran once")
	})
}

// MaxDeferrals -1 turns deferrals off: the in-flight answer is a failure
// like any other, and MaxAttempts 1 ends the slot with it.
func TestDeferralsOffCountEveryFailure(t *testing.T) {
	t.Parallel()
	onFakeTime(t, utc(9, 59, 58), func(t *testing.T, r *rig) {
		d := &deferring{now: r.clk.Now, errs: []error{&inFlight{wait: 10 * time.Second}}}
		r.replica(0, scheduler.Job{Name: "strict", Spec: "0 * * * *", MaxAttempts: 1, MaxDeferrals: -1, Run: d.run})
		r.tick(time.Minute, time.Second)
		rec := r.record("strict", utc(10, 0, 0))
		require.Equal(t, ledger.StatusFailed, rec.Status)
		require.True(t, rec.RetryAt.IsZero(), "the failure is final")
		require.Equal(t, 1, rec.Attempt)
		require.Equal(t, ledger.ClassRetryable, rec.Attempts[0].Class)
	})
}
