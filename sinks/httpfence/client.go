package httpfence

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/retry"
)

// Defaults for Transport.
const (
	// defaultMaxAttempts is the number of attempts per request, the first
	// included.
	defaultMaxAttempts = 4
	// defaultBaseDelay is the backoff before the second attempt; it doubles
	// per attempt, with jitter, up to MaxDelay.
	defaultBaseDelay = 100 * time.Millisecond
	// defaultMaxDelay caps every wait, backoff and Retry-After alike, the
	// polls of a key in flight included (see defaultMaxInFlightWait).
	defaultMaxDelay = 10 * time.Second
	// defaultMaxInFlightWait bounds the time one RoundTrip waits in all on
	// in-flight answers (2 min): longer than the middleware's 1 min, so the key of a server that crashed
	// mid-request frees up within one request.
	defaultMaxInFlightWait = 2 * time.Minute
)

// maxDrainBytes is how much of a retried response's body is read so that its
// connection can be reused; the rest is dropped with the connection.
const maxDrainBytes = 64 << 10

type keyCtxKey struct{}

// WithIdempotencyKey returns a copy of ctx whose requests sent through a
// Transport carry key in the Idempotency-Key header. Use one key per
// logical operation, the same for all its attempts (the scheduler's
// Run.IdempotencyKey is one). key must be 1 to MaxKeyLen bytes of printable
// ASCII; RoundTrip fails with ErrInvalidKey otherwise.
func WithIdempotencyKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyCtxKey{}, key)
}

// KeyFromContext returns the key set by WithIdempotencyKey; inside a
// handler wrapped by Middleware, the request's parsed Idempotency-Key
// (ok is false for a method the middleware passes through).
func KeyFromContext(ctx context.Context) (string, bool) {
	key, ok := ctx.Value(keyCtxKey{}).(string)
	return key, ok
}

// Transport is an http.RoundTripper that sends the idempotency key and the
// fencing token of the request's context, and retries.
//
// Headers: Idempotency-Key from WithIdempotencyKey (as an RFC 8941
// sf-string; a key already set on the request is kept when the context has
// none), Fencing-Token, Fencing-Owner and Fencing-Scope from
// fence.HolderFromContext (the token in decimal, the owner and the scope as
// sf-strings; no Fencing-Scope for scope "", which the middleware reads as
// ""). A lease's or a scheduler run's context carries its holder already.
// A request made to follow a redirect to another origin gets no fencing
// headers, and no redirected request is signed (see Signer).
//
// Retries: a network error, 409, 429 or 5xx is retried up to MaxAttempts
// attempts in all, with the same key and headers, when the request can be
// sent again: its method is idempotent (GET, HEAD, OPTIONS, TRACE, PUT,
// DELETE) or it carries an Idempotency-Key, and it has no body or a GetBody
// (http.NewRequest sets one for in-memory bodies). A POST or PATCH without a
// key is sent once. The wait before attempt n+1 is a jittered exponential
// backoff (BaseDelay * 2^(n-1), between half and all of it, capped at
// MaxDelay), or the response's Retry-After (seconds or HTTP-date) when that
// is longer. A Retry-After beyond MaxDelay ends the retries: the response is
// returned as is. Cancelling the request's context ends the wait at once;
// the error then matches both the context error and the last attempt's.
// The last attempt's outcome is returned unchanged, whatever its status.
// Every send of a request with a body is one of the attempts: net/http's
// Transport resends on its own a request with an Idempotency-Key when a
// reused connection closes before the answer, rewinding its body with
// GetBody (http.Transport's retry rule), which would run a handler that
// released the key (it panicked, say) once more than MaxAttempts allows;
// so Base gets the request with a GetBody that refuses, and such a closed
// connection is an attempt's error. net/http still sends again a request
// it never wrote (a stale keep-alive connection); over HTTP/2, a request
// the server refused unprocessed (REFUSED_STREAM, GOAWAY) after its body
// was sent is an attempt's error too. A request without a body can still
// be sent again by net/http, as can a GET, HEAD, OPTIONS or TRACE request
// without one.
//
// In flight: a 409 whose RFC 9457 problem type ends in "/request-in-flight"
// (what Middleware sends while another request holds the key, for
// instance one whose server crashed mid-request, until the server's
// Options.LockTTL frees the key, or a concurrent duplicate still running)
// is not an attempt: RoundTrip polls, sending again without counting it
// against MaxAttempts. Its Retry-After (the lock's remaining time) is the
// upper bound of each wait, not the wait: the original request usually
// ends long before its lock would, so RoundTrip waits the shorter of the
// Retry-After and a jittered backoff of its own that starts at BaseDelay
// and doubles per in-flight answer up to MaxDelay (100 ms, 200 ms, 400 ms,
// ... with the defaults; each a draw between half and all of it). So a
// concurrent duplicate learns the original's answer up to one wait after
// the original completes, a wait that grows with the time polled so far
// (about as long as all the waits before it) up to MaxDelay (10 s by
// default): lower MaxDelay to bound that lag, at the cost of more polls. It
// keeps polling as long as the waits on in-flight answers stay within
// MaxInFlightWait in all and each wait ends before the request context's
// deadline. Otherwise it closes the
// answer and returns a nil response and an *InFlightError (matching
// ErrInFlight) whose RetryAfter is the server's: a caller with a retry of
// its own (the scheduler's, see scheduler.RetryAfter) comes back then
// without counting a failure. A request that cannot be sent again gets
// the 409 as is.
//
// Stale token: a 412 whose RFC 9457 problem type ends in
// "/stale-fencing-token" (what Middleware sends) is not returned as a
// response: RoundTrip closes it and returns a nil response and a
// *fence.StaleTokenError (matching fence.ErrStaleToken), never retried.
// http.Client wraps it in a *url.Error, through which errors.As and
// errors.Is still find it. This departs from the RoundTripper convention
// that any status is a response on purpose: a stale holder must stop, and an
// error is what callers cannot overlook.
//
// The zero Transport is ready to use; it is safe for concurrent use and
// must not be copied after first use.
type Transport struct {
	// Base sends each attempt. Default http.DefaultTransport.
	Base http.RoundTripper
	// MaxAttempts is the number of attempts per request, the first
	// included. 0: 4 attempts; 1: no retries.
	MaxAttempts int
	// BaseDelay is the backoff before the second attempt. 0: 100 ms.
	BaseDelay time.Duration
	// MaxDelay caps each wait, the polls of a key in flight included. 0: 10 s.
	MaxDelay time.Duration
	// MaxInFlightWait bounds the time one RoundTrip waits in all on
	// in-flight answers (polling, see above), which are not counted as
	// attempts; set it above the server's LockTTL. 0: 2 min; -1: no
	// wait, the first in-flight answer ends RoundTrip with an
	// *InFlightError.
	MaxInFlightWait time.Duration

	// Now reads the clock for HTTP-date Retry-After values and for the
	// Fencing-Signature's time (Signer). nil: time.Now.
	Now func() time.Time
	// Sleep waits d or until ctx ends, returning ctx's error then. nil: a
	// timer. Tests inject it to observe waits without sleeping.
	Sleep func(ctx context.Context, d time.Duration) error

	// Signer, when set, signs the fencing headers of every attempt that
	// carries them (SignatureHeader: an HMAC-SHA256 over the scope, token,
	// owner, idempotency key, method, request target and body, made with
	// Now), so that a Middleware with the matching Verifier admits them and
	// refuses forged ones. A body without GetBody is read into memory once
	// to be signed. nil: no signature (a Middleware with a Verifier then
	// answers 403).
	//
	// A request an http.Client makes to follow a redirect (one whose
	// Response is set) is never signed: its method, target and body are
	// the redirecting server's choice, not the holder's, and a signature
	// over them would let any host the job calls (or one it redirects to)
	// have the holder sign a request of that host's choosing, such as
	// 307 Location: https://payments/v1/charges?amount=999999, for
	// another service that shares the key. A redirect to another origin
	// (scheme, host or port differing from any request before it in the
	// chain) carries neither Fencing-Token, Fencing-Owner nor
	// Fencing-Scope either, as net/http drops Authorization on a
	// cross-domain redirect: the owner is a write capability. A
	// same-origin redirect keeps them unsigned, so a Middleware with a
	// Verifier answers it 403: send fenced writes to their final URL.
	Signer *Signer

	// TracerProvider gives the tracer of RoundTrip's span
	// (holdfast.httpfence.request; docs/operations.md, "Traces"). nil:
	// otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// Propagator puts the trace context in every attempt's headers. nil:
	// W3C Trace Context (traceparent, tracestate).
	Propagator propagation.TextMapPropagator
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	req, span := t.startRequest(req)
	resp, err := t.roundTrip(req)
	status := 0
	if resp != nil {
		status = resp.StatusCode
	}
	endHTTPSpan(span, status, err)
	return resp, err
}

func (t *Transport) roundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	r := req.Clone(ctx) // RoundTrip must not modify req
	t.inject(ctx, r.Header)
	if err := setHeaders(ctx, r.Header); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	var sign *signed
	switch {
	case req.Response != nil && !sameOriginChain(req):
		// A redirect to another origin: the holder's token and owner
		// are not sent there, nor signed (see Transport.Signer).
		for _, h := range []string{TokenHeader, OwnerHeader, ScopeHeader, SignatureHeader} {
			r.Header.Del(h)
		}
	case req.Response != nil:
		r.Header.Del(SignatureHeader) // a same-origin redirect: never signed
	default:
		var err error
		if sign, err = t.toSign(r); err != nil {
			return nil, err
		}
	}
	retryable := canResend(r)
	maxAttempts := t.maxAttempts()
	var inFlightWaited time.Duration // waits on in-flight answers, not attempts
	polls := 0                       // in-flight answers so far
	sent := false
	for attempt := 1; ; attempt++ {
		if sent { // every send after the first, in-flight answers' included
			r = r.Clone(ctx)
			if r.GetBody != nil {
				body, err := r.GetBody()
				if err != nil {
					return nil, fmt.Errorf("httpfence: rewind request body for attempt %d: %w", attempt, err)
				}
				r.Body = body
			}
		}
		if sign != nil {
			r.Header.Set(SignatureHeader, t.Signer.header(sign, t.now()))
		}
		resp, err := t.base().RoundTrip(sendOnce(r))
		sent = true
		if err == nil {
			if stale, ok := readStale(resp); ok {
				drainClose(resp)
				if stale.Resource == "" {
					stale.Resource = r.URL.Redacted()
				}
				if h, ok := fence.HolderFromContext(ctx); ok && stale.Presented == fence.None {
					stale.Presented, stale.Scope = h.Token, h.Scope
				}
				return nil, stale
			}
			if retryable && readInFlight(resp) {
				lockLeft, ok := retryAfter(resp.Header.Get("Retry-After"), t.now())
				if !ok || lockLeft <= 0 {
					lockLeft = t.baseDelay()
				}
				drainClose(resp)
				inFlight := &InFlightError{URL: r.URL.Redacted(), Wait: lockLeft}
				// Poll: the lock's remaining time bounds the wait, the
				// original usually ends far sooner.
				polls++
				wait := min(lockLeft, t.backoff(polls))
				if !t.waitInFlight(ctx, inFlightWaited, wait) {
					return nil, inFlight
				}
				if err := t.sleep(ctx, wait); err != nil {
					return nil, errors.Join(err, inFlight)
				}
				inFlightWaited += wait
				attempt-- // not an attempt: the key was busy
				continue
			}
		}
		if !retryable || attempt >= maxAttempts || !retryableOutcome(resp, err) {
			return resp, err
		}
		wait := t.backoff(attempt)
		last := err
		if resp != nil {
			if ra, ok := retryAfter(resp.Header.Get("Retry-After"), t.now()); ok {
				if ra > t.maxDelay() {
					return resp, nil // the server asks for more than we wait
				}
				wait = max(wait, ra)
			}
			last = fmt.Errorf("httpfence: attempt %d: %s", attempt, resp.Status)
			drainClose(resp)
		}
		if err := t.sleep(ctx, wait); err != nil {
			return nil, errors.Join(err, last)
		}
	}
}

// waitInFlight reports whether RoundTrip waits wait on an in-flight answer,
// having waited waited on such answers already: within MaxInFlightWait in
// all, and ending before ctx's deadline (read on Now's clock).
func (t *Transport) waitInFlight(ctx context.Context, waited, wait time.Duration) bool {
	limit := t.MaxInFlightWait
	if limit == 0 {
		limit = defaultMaxInFlightWait
	}
	if limit < 0 || waited+wait > limit {
		return false
	}
	dl, ok := ctx.Deadline()
	return !ok || t.now().Add(wait).Before(dl)
}

// ErrInFlight is matched by an *InFlightError.
var ErrInFlight = errors.New("httpfence: request with this idempotency key in flight")

// InFlightError is RoundTrip's error for an in-flight answer it did not
// wait out (see Transport): another request holds the key at the server,
// whose lock ends in about Wait. It matches ErrInFlight; its RetryAfter
// method makes it a deferral (see scheduler.RetryAfter): the scheduler's
// attempt comes back after Wait without counting a failure.
type InFlightError struct {
	// URL is the request's URL with its password, if any, masked
	// (url.URL.Redacted).
	URL string
	// Wait is the server's Retry-After: the lock's remaining time, in
	// whole seconds rounded up (Transport.BaseDelay when it sent none).
	Wait time.Duration
}

func (e *InFlightError) Error() string {
	return fmt.Sprintf("httpfence: %s: a request with this Idempotency-Key is in flight at the server; retry after %v", e.URL, e.Wait)
}

// Is reports whether target is ErrInFlight.
func (e *InFlightError) Is(target error) bool { return target == ErrInFlight }

// RetryAfter returns Wait: when the server says to come back.
func (e *InFlightError) RetryAfter() time.Duration { return e.Wait }

// CloseIdleConnections closes the idle connections of Base when it can.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base().(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// sameOriginChain reports whether every request of req's redirect chain
// (req.Response.Request, its Response.Request, ...) has req's origin:
// scheme, host and port, the default port filled in.
func sameOriginChain(req *http.Request) bool {
	want := origin(req.URL)
	for r := req; r.Response != nil && r.Response.Request != nil; r = r.Response.Request {
		if origin(r.Response.Request.URL) != want {
			return false
		}
	}
	return true
}

// origin returns u's scheme, host and port in lower case, the port
// defaulted from the scheme; "" for a nil URL.
func origin(u *url.URL) string {
	if u == nil {
		return ""
	}
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

// setHeaders writes the key and the fencing headers carried by ctx.
func setHeaders(ctx context.Context, h http.Header) error {
	if key, ok := KeyFromContext(ctx); ok {
		v, err := FormatKey(key)
		if err != nil {
			return err
		}
		h.Set(KeyHeader, v)
	}
	if holder, ok := fence.HolderFromContext(ctx); ok {
		if err := checkValue(holder.Owner); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidOwner, err)
		}
		h.Set(TokenHeader, holder.Token.String())
		h.Set(OwnerHeader, quote(holder.Owner))
		h.Del(ScopeHeader)
		if holder.Scope != "" {
			v, err := FormatScope(holder.Scope)
			if err != nil {
				return err
			}
			h.Set(ScopeHeader, v)
		}
	}
	return nil
}

// toSign returns what the Signer signs for r, nil when there is no Signer
// or r carries no fencing headers. A body that cannot be produced again is
// read into memory (and r given a GetBody) so that it can be hashed and
// still sent. On error r's body is closed.
func (t *Transport) toSign(r *http.Request) (*signed, error) {
	if t.Signer == nil {
		return nil, nil
	}
	holder, fenced, err := ParseFencing(r.Header)
	if err != nil || !fenced {
		r.Header.Del(SignatureHeader)
		if r.Body != nil && err != nil {
			_ = r.Body.Close()
		}
		return nil, err
	}
	s := &signed{method: r.Method, target: r.URL.RequestURI(), holder: holder}
	if vs := r.Header.Values(KeyHeader); len(vs) == 1 {
		s.key, _ = ParseKey(vs[0]) // an invalid key is refused by the server anyway
	}
	var body []byte
	switch {
	case r.Body == nil || r.Body == http.NoBody:
	case r.GetBody != nil:
		rc, err := r.GetBody()
		if err == nil {
			body, err = io.ReadAll(rc)
			_ = rc.Close()
		}
		if err != nil {
			_ = r.Body.Close()
			return nil, fmt.Errorf("httpfence: read request body to sign it: %w", err)
		}
	default:
		body, err = io.ReadAll(r.Body)
		_ = r.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("httpfence: read request body to sign it: %w", err)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	s.bodySum = sha256.Sum256(body)
	return s, nil
}

// canResend reports whether r may be sent more than once: an idempotent
// method or an idempotency key, and a body that can be produced again.
func canResend(r *http.Request) bool {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
	default:
		if r.Header.Get(KeyHeader) == "" {
			return false
		}
	}
	return r.Body == nil || r.Body == http.NoBody || r.GetBody != nil
}

// sendOnce returns r as Base gets it when it has a body: with a GetBody
// that refuses (errSentOnce), so that net/http's Transport does not send
// again a request whose body it sent (see Transport). net/http calls
// GetBody only to rewind a body it read; it still sends again one it
// never wrote (a stale keep-alive connection). r itself keeps its
// GetBody, to rewind the body for the Transport's own attempts.
func sendOnce(r *http.Request) *http.Request {
	if r.GetBody == nil || r.Body == nil || r.Body == http.NoBody {
		return r
	}
	once := *r // a shallow copy, as Request.WithContext makes
	once.GetBody = func() (io.ReadCloser, error) { return nil, errSentOnce }
	return &once
}

// errSentOnce is what net/http's Transport gets when it would send a
// request again on its own after its connection closed before the answer:
// the attempt ends with it (see Transport).
var errSentOnce = errors.New("httpfence: the connection closed after the request was sent, before the answer; net/http does not send it again (each send is one of MaxAttempts)")

// retryableOutcome is the one place that decides whether an attempt's
// outcome is worth another attempt: any transport error, 409 (in flight
// elsewhere), 429 and every 5xx. An error caused by the request context's
// end is "retryable" too: the wait that follows returns at once with the
// context's error, joined with this one.
func retryableOutcome(resp *http.Response, err error) bool {
	if err != nil {
		return true
	}
	return resp.StatusCode == http.StatusConflict || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500
}

// retryAfter parses a Retry-After value (RFC 9110 §10.2.3): delay-seconds or
// an HTTP-date, relative to now. A date in the past means no wait.
func retryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		secs, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return 0, false
		}
		return time.Duration(secs) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(at.Sub(now), 0), true
}

// backoff returns the jittered wait after attempt n (1-based): a uniform
// draw from [d/2, d] where d = BaseDelay * 2^(n-1), capped at MaxDelay
// (internal/retry).
func (t *Transport) backoff(n int) time.Duration {
	return retry.Delay(n, t.baseDelay(), t.maxDelay(), 0.5, 0, nil)
}

func (t *Transport) base() http.RoundTripper {
	if t.Base == nil {
		return http.DefaultTransport
	}
	return t.Base
}

func (t *Transport) maxAttempts() int {
	if t.MaxAttempts <= 0 {
		return defaultMaxAttempts
	}
	return t.MaxAttempts
}

func (t *Transport) baseDelay() time.Duration {
	if t.BaseDelay <= 0 {
		return defaultBaseDelay
	}
	return t.BaseDelay
}

func (t *Transport) maxDelay() time.Duration {
	if t.MaxDelay <= 0 {
		return defaultMaxDelay
	}
	return t.MaxDelay
}

func (t *Transport) now() time.Time {
	if t.Now == nil {
		return time.Now()
	}
	return t.Now()
}

func (t *Transport) sleep(ctx context.Context, d time.Duration) error {
	if t.Sleep != nil {
		return t.Sleep(ctx, d)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// drainClose reads a little of resp's body, so its connection can be reused,
// and closes it.
func drainClose(resp *http.Response) {
	_, _ = io.CopyN(io.Discard, resp.Body, maxDrainBytes)
	_ = resp.Body.Close()
}
