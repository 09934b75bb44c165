package httpfence

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore"
	"github.com/holdfast-go/holdfast/sinks/httpfence/problem"
)

// Defaults for Options.
const (
	// defaultMaxBodyBytes limits request bodies (larger: 413).
	defaultMaxBodyBytes = 1 << 20
	// defaultMaxResponseBytes limits the response body kept for replay.
	defaultMaxResponseBytes = 1 << 20
	// defaultTTL is how long a completed record is kept for replay.
	defaultTTL = 24 * time.Hour
	// defaultLockTTL is how long an in-flight record blocks its key when
	// the handler never finishes (the process crashed).
	defaultLockTTL = time.Minute
	// defaultStoreTimeout bounds Complete and Abandon after the handler.
	defaultStoreTimeout = 5 * time.Second
	// defaultMaxTokenAhead is how far ahead of the server's clock a token
	// may be (5 min), read as microseconds since the Unix epoch. A lease
	// token is max(counter+1, Redis TIME in µs): a healthy one is ahead of
	// the server's clock by the clock skew between Redis and the server
	// (well under a second with NTP) at most. 5 minutes leaves room for a
	// badly kept clock while a token that got past every other check can
	// block a fence for 5 minutes at most, not a day.
	defaultMaxTokenAhead = 5 * time.Minute
)

// DefaultMethods are the methods the middleware applies to when
// Options.Methods is nil. Others pass through untouched.
var DefaultMethods = []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// Options configures Middleware. Only Store is required.
type Options struct {
	// Store keeps the idempotency records. Required.
	Store idemstore.Store

	// Fence, when set, applies the fence acceptance rule to every request
	// that claims a new key: the request must then carry Fencing-Token and
	// Fencing-Owner (400 otherwise), and a stale token is answered with 412.
	// The fence is kept per (Resource(r), scope[, Identity(r)]), scope being
	// the Fencing-Scope header ("" when absent): tokens of different leases
	// are never compared. A replay of a completed key raises the fence with
	// its token too (see the package documentation). nil: tokens are parsed
	// (400 when malformed) and passed to the handler in the context, but
	// not checked.
	Fence idemstore.FenceStore

	// TracerProvider gives the tracer of the span of each request with a
	// method in Methods (holdfast.httpfence.serve; docs/operations.md,
	// "Traces"). nil: otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// Propagator reads the caller's trace context from the request
	// headers. nil: W3C Trace Context (traceparent, tracestate).
	Propagator propagation.TextMapPropagator

	// Resource names what a request writes, for Fence. Default: the
	// request's URL path.
	Resource func(r *http.Request) string

	// Identity scopes idempotency keys and fences, typically by tenant or
	// authenticated client: two identities never share a key or a fence,
	// so no client can fence a resource for another. It must name the
	// party that holds the leases, the same for every replica of a client:
	// an identity per replica (a per-pod certificate) gives each replica a
	// fence and keys of its own, so a stale replica is never refused and a
	// retry from another replica runs the handler again. A request for
	// which it returns "" has identity "", shared by every such request.
	// Default: no scoping: every caller shares every key, so without a
	// Fence any caller can use up a job's key before the job sends it;
	// keys are per client in the idempotency-key draft, so set Identity
	// wherever callers are authenticated.
	// When set, the resource handed to Fence is
	// len(identity) ":" identity ":" Resource(r) (unambiguous for any
	// bytes); problems still report Resource(r). It runs after the handlers
	// wrapping the middleware (authentication, say) and before the key
	// lookup.
	// It must return valid UTF-8 without NUL bytes (PostgreSQL's text
	// holds neither; encode a binary or Latin-1 subject first, in hex or
	// base64): any other value is answered, on every store and before any
	// is touched, with 500 invalid-identity and an identity_invalid log
	// event (reason, length and offset of the first bad byte; never the
	// identity). 500, not 4xx: Identity is the server's own function, so
	// the fault is the server's configuration, and it should show in the
	// server's error rate; the Transport retries a 500 within MaxAttempts
	// like any 5xx.
	Identity func(r *http.Request) string

	// MaxTokenAhead refuses, with a 400 implausible-fencing-token problem,
	// a token larger than the server's clock (Now) in microseconds since the
	// Unix epoch plus MaxTokenAhead: a client that sends
	// Fencing-Token: 18446744073709551615 would otherwise fence a resource
	// for everyone for ever. It relies on the lease tokens' time floor
	// (package lease issues max(counter+1, Redis TIME in µs), so a healthy
	// token is about now in µs). Default 5 min; -1
	// turns the check off, for tokens that are plain counters.
	MaxTokenAhead time.Duration

	// Verifier, when set, admits fencing headers only with a valid
	// Fencing-Signature (SignatureHeader) made by a Transport whose Signer
	// holds one of its keys: a request that carries a token without one, or
	// with one that is malformed (400 invalid-fencing-signature), made with
	// an unknown key, more than MaxSignatureAge from the server's clock, or
	// over other values (403 fencing-signature-rejected), is refused before
	// any store is touched and before the handler runs. This is what keeps
	// a caller that is not a lease holder (it does not know a key) from
	// moving a fence: see "Authenticated fencing" in the package
	// documentation. Requests without fencing headers need no signature.
	Verifier *Verifier

	// MaxSignatureAge is how far a signature's time may be from the
	// server's clock (Now), either way. It bounds how long a captured
	// signed request can be replayed. A signature is admitted for
	// 2*MaxSignatureAge of server time (its time minus MaxSignatureAge,
	// with a client clock ahead, to its time plus MaxSignatureAge), so TTL
	// must be at least 2*MaxSignatureAge (ErrInvalidOptions otherwise):
	// then a replay by the original's identity (the same Identity(r), or
	// any caller without Identity) finds the original's record (and is
	// answered from it) rather than running the handler again. With
	// Identity set, a replay by another authenticated identity finds no
	// record (keys and fences are per identity) and runs the handler once
	// more under that identity, with the original holder's token: see
	// "Authenticated fencing" in the package documentation. Default 5 min.
	// Used with Verifier only.
	MaxSignatureAge time.Duration

	// AllowUnauthenticatedFencing admits fencing headers from any caller
	// when there is neither a Verifier nor an Identity: any client of the
	// service can then present a token (up to MaxTokenAhead ahead) and move
	// a fence, blocking the lease's real holders. Only for services every
	// client of which is trusted (tests, a private network with no other
	// clients). Default false: Middleware refuses a Fence without a
	// Verifier, an Identity or this opt-in (ErrInvalidOptions), refuses
	// this opt-in beside a Verifier (which it would not loosen), and, with
	// no Fence, answers fencing headers with 403 fencing-signature-rejected
	// instead of handing an unauthenticated holder to the handler.
	AllowUnauthenticatedFencing bool

	// Now reads the clock for MaxTokenAhead and MaxSignatureAge. Default
	// time.Now.
	Now func() time.Time

	// Methods lists the methods the middleware applies to; requests with
	// other methods go to the handler untouched. Default DefaultMethods
	// (POST, PUT, PATCH, DELETE). A method is matched without regard to
	// case: methods are case-sensitive (RFC 9110 §9.1), so "post" is not
	// POST, but a handler that does not look at the method serves it as
	// one, and the middleware must not let it through unguarded.
	Methods []string

	// MaxBodyBytes limits the request body, which is read in full to
	// fingerprint it (larger: 413). Default 1 MiB;
	// -1: no limit.
	MaxBodyBytes int64

	// MaxResponseBytes limits the response body kept for replay. A larger
	// response still reaches the client in full, but is stored as a 410
	// response-not-retained problem: the handler does not run again for the
	// key. Default 1 MiB; -1: no limit.
	MaxResponseBytes int64

	// TTL is how long a completed record is kept and replayed. Default 24 h.
	TTL time.Duration

	// LockTTL is how long an in-flight record holds its key. A request
	// whose handler runs longer than LockTTL loses the key: a retry may run
	// the handler a second time, and the late response is not stored.
	// Default 1 min.
	LockTTL time.Duration

	// StoreTimeout bounds the store calls made after the handler returns
	// (Complete, Abandon), which run even when the client has gone away.
	// Default 5 s.
	StoreTimeout time.Duration

	// Storable reports whether a response with the handler's status code is
	// stored for replay; when false the key is released and a retry runs the
	// handler again. Default DefaultStorable (every status below 500 except
	// 408, 409, 412, 425 and 429: a handler's own 412 stale-fencing-token
	// or 409 is not replayed to the next holder of the key). A Storable
	// that keeps 412 makes a key refused to a stale holder refused to
	// every later holder for TTL.
	Storable func(status int) bool

	// ProblemBase prefixes the problem type URIs. Default
	// problem.DefaultBase ("https://holdfast.dev/problems/").
	ProblemBase string

	// Logger receives stale_token_rejected and store failure events.
	// Default: discard.
	Logger *slog.Logger
}

// DefaultStorable stores every response below 500 except 408, 409, 412,
// 425 and 429: a retry of a 5xx or of one of these runs the handler again.
// 408, 425 and 429 tell the client to come back. 409 and 412 are what a
// handler that fences its own write (see "Non-guarantees" in the package
// documentation) answers a holder it refuses: stored, a 412
// stale-fencing-token given to an old holder would be replayed to the
// current holder sending the same slot's key (the Transport would report
// the old holder's token as stale, and the slot would never run); so they
// release the key, as the middleware's own 409 and 412 do. A handler that
// answers 412 for its own preconditions (If-Match) has made no change, so
// running it again on a retry is safe.
func DefaultStorable(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusPreconditionFailed, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	}
	return status < 500
}

func (c Options) withDefaults() Options {
	if c.Resource == nil {
		c.Resource = func(r *http.Request) string { return r.URL.Path }
	}
	if c.MaxTokenAhead == 0 {
		c.MaxTokenAhead = defaultMaxTokenAhead
	}
	if c.MaxSignatureAge == 0 {
		c.MaxSignatureAge = defaultMaxSignatureAge
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Methods == nil {
		c.Methods = DefaultMethods
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = defaultMaxBodyBytes
	}
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = defaultMaxResponseBytes
	}
	if c.TTL == 0 {
		c.TTL = defaultTTL
	}
	if c.LockTTL == 0 {
		c.LockTTL = defaultLockTTL
	}
	if c.StoreTimeout == 0 {
		c.StoreTimeout = defaultStoreTimeout
	}
	if c.Storable == nil {
		c.Storable = DefaultStorable
	}
	if c.ProblemBase == "" {
		c.ProblemBase = problem.DefaultBase
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Options) validate() error {
	switch {
	case c.Store == nil:
		return fmt.Errorf("%w: Store is required", ErrInvalidOptions)
	case c.MaxBodyBytes < -1:
		return fmt.Errorf("%w: MaxBodyBytes %d: want > 0, or -1 for no limit", ErrInvalidOptions, c.MaxBodyBytes)
	case c.MaxResponseBytes < -1:
		return fmt.Errorf("%w: MaxResponseBytes %d: want > 0, or -1 for no limit", ErrInvalidOptions, c.MaxResponseBytes)
	case c.TTL < time.Millisecond:
		return fmt.Errorf("%w: TTL %v: want at least 1ms", ErrInvalidOptions, c.TTL)
	case c.LockTTL < time.Millisecond:
		return fmt.Errorf("%w: LockTTL %v: want at least 1ms", ErrInvalidOptions, c.LockTTL)
	case c.StoreTimeout < 0:
		return fmt.Errorf("%w: StoreTimeout %v: want > 0", ErrInvalidOptions, c.StoreTimeout)
	case c.MaxTokenAhead < -1 || (c.MaxTokenAhead > 0 && c.MaxTokenAhead < time.Microsecond):
		return fmt.Errorf("%w: MaxTokenAhead %v: want at least 1µs, or -1 for no limit", ErrInvalidOptions, c.MaxTokenAhead)
	case c.MaxSignatureAge < time.Second:
		return fmt.Errorf("%w: MaxSignatureAge %v: want at least 1s", ErrInvalidOptions, c.MaxSignatureAge)
	case c.Verifier != nil && c.TTL < 2*c.MaxSignatureAge:
		return fmt.Errorf("%w: TTL %v shorter than 2*MaxSignatureAge (%v): a signature is admitted from MaxSignatureAge before to MaxSignatureAge after its time, so a replay could come after the original's record expired and run the handler again", ErrInvalidOptions, c.TTL, 2*c.MaxSignatureAge)
	case c.Verifier != nil && c.AllowUnauthenticatedFencing:
		return fmt.Errorf("%w: AllowUnauthenticatedFencing with a Verifier: the Verifier requires a signature on every fenced request, so the opt-in would do nothing; drop one of them", ErrInvalidOptions)
	case c.Fence != nil && c.Verifier == nil && c.Identity == nil && !c.AllowUnauthenticatedFencing:
		return fmt.Errorf("%w: a Fence needs a Verifier (signed fencing headers) or an Identity, or AllowUnauthenticatedFencing: true to let any client move a fence", ErrInvalidOptions)
	}
	return nil
}

// Middleware returns the idempotency and fencing middleware described in the
// package documentation, or an error matching ErrInvalidOptions.
func Middleware(cfg Options) (func(http.Handler) http.Handler, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	var joined idemstore.FencedStore
	if fs, ok := cfg.Store.(idemstore.FencedStore); ok && cfg.Fence != nil && fs.JoinsFence(cfg.Fence) {
		joined = fs
	}
	return func(next http.Handler) http.Handler {
		return &middleware{cfg: cfg, next: next, joined: joined, table: stateTable()}
	}, nil
}

type middleware struct {
	cfg  Options
	next http.Handler
	// joined is cfg.Store when it applies cfg.Fence in Begin's own step
	// (FencedStore); nil when Begin and Accept are separate calls.
	joined idemstore.FencedStore
	table  map[stateEvent]transition // transitions, indexed
}

// call is one request on its way through the state table.
type call struct {
	r        *http.Request
	key      string // the Idempotency-Key
	storeKey string // key, scoped by Identity(r)
	holder   fence.Holder
	fenced   bool // the request carried fencing headers
	body     []byte
	resource string            // Resource(r), as the client is told
	fenceRes string            // what the fence store keys by
	out      idemstore.Outcome // what Begin found
	detail   string            // the problem's detail
	current  fence.Token
	closed   time.Time // a closed slot scope's watermark (stale)
}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !slices.ContainsFunc(m.cfg.Methods, func(x string) bool { return strings.EqualFold(x, r.Method) }) {
		m.next.ServeHTTP(w, r)
		return
	}
	m.traced(w, r, m.serve)
}

// serve steps r through the state table.
func (m *middleware) serve(w http.ResponseWriter, r *http.Request) {
	c := &call{r: r}
	state, ev := stateUnclaimed, m.admit(w, c)
	if ev == evBegin {
		if ev = m.begin(c); ev == evBegin {
			state = c.out.State
		}
	}
	for {
		tr := m.step(state, ev)
		switch tr.action {
		case actFence:
			ev = m.accept(c)
		case actRun:
			m.run(w, c)
			return
		case actReplay:
			replay(w, c.out.Response)
			return
		case actRetry:
			w.Header().Set("Retry-After", retryAfterSeconds(c.out.LockLeft))
			m.answer(w, c, tr)
			return
		case actRelease:
			m.abandon(r.Context(), c.storeKey, c.out.Lock)
			m.answer(w, c, tr)
			return
		default: // actRefuse
			m.answer(w, c, tr)
			return
		}
	}
}

// answer sends tr's problem with c's detail; a stale token is logged and
// its problem carries the four extension members.
func (m *middleware) answer(w http.ResponseWriter, c *call, tr transition) {
	p := problem.Details{Type: m.cfg.ProblemBase + tr.problem, Title: tr.title, Status: tr.status, Detail: c.detail}
	if tr.problem == problem.StaleToken {
		h := c.holder
		attrs := []slog.Attr{slog.String("resource", c.resource), slog.String("scope", h.Scope), slog.String("owner_id", fence.OwnerID(h.Owner)),
			slog.Uint64("presented", uint64(h.Token)), slog.Uint64("current", uint64(c.current))}
		if !c.closed.IsZero() {
			attrs = append(attrs, slog.Time("closed_before", c.closed))
		}
		m.cfg.Logger.LogAttrs(c.r.Context(), slog.LevelWarn, "stale_token_rejected", attrs...)
		p.Resource, p.Scope, p.CurrentToken, p.PresentedToken = c.resource, h.Scope, c.current, h.Token
		if !c.closed.IsZero() {
			p.ClosedBefore = c.closed.UTC().Format(time.RFC3339)
		}
	}
	writeProblem(w, p)
}

// admit checks the headers, reads the body and checks who sent the
// fencing headers, before any store is touched: evBegin when the request
// may claim its key.
func (m *middleware) admit(w http.ResponseWriter, c *call) event {
	r := c.r
	if ev := m.headers(c); ev != evBegin {
		return ev
	}
	// The body, read in full for the fingerprint and replayed to the handler.
	body, err := m.readBody(w, r)
	if err != nil {
		c.detail = err.Error()
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			c.detail = fmt.Sprintf("limit %d bytes", tooLarge.Limit)
			return evBodyTooLarge
		}
		// The client went away or sent a broken body: nothing to store.
		return evBodyUnreadable
	}
	c.body = body
	if !c.fenced {
		return evBegin
	}
	// Who sent the fencing headers: refused unless a key holder signed
	// them (or the deployment opted out).
	if ev := m.authenticated(c); ev != evBegin {
		return ev
	}
	// The token's ceiling, after the signature: a caller without a key
	// learns nothing from it. The detail leaves the server's clock out.
	if !m.plausible(c.holder.Token) {
		c.detail = fmt.Sprintf("token %d is more than MaxTokenAhead (%v) ahead of the server's clock", c.holder.Token, m.cfg.MaxTokenAhead)
		return evImplausible
	}
	return evBegin
}

// headers parses the key, then the fencing token and owner, into c.
func (m *middleware) headers(c *call) event {
	keys := c.r.Header.Values(KeyHeader)
	switch len(keys) {
	case 0:
		return evNoKey
	case 1:
	default:
		c.detail = "more than one field line"
		return evBadKey
	}
	key, err := ParseKey(keys[0])
	if err != nil {
		c.detail = err.Error()
		return evBadKey
	}
	c.key = key
	c.holder, c.fenced, err = ParseFencing(c.r.Header)
	switch {
	case err != nil:
		c.detail = err.Error()
		return evBadFencing
	case c.fenced && c.holder.Token == fence.None:
		c.detail = fence.ErrNoToken.Error()
		return evBadFencing
	case !c.fenced && m.cfg.Fence != nil:
		return evNoFencing
	}
	return evBegin
}

// begin claims c's key, or learns what holds it: evBegin with c.out set.
// A joined store checks the fence in the same step.
func (m *middleware) begin(c *call) event {
	r := c.r
	c.storeKey = c.key
	var id string
	if m.cfg.Identity != nil {
		if id = m.cfg.Identity(r); id != "" {
			if ev := m.checkIdentity(c, id); ev != evBegin {
				return ev
			}
			// Keys are printable ASCII, so the last 0x1f splits the pair.
			c.storeKey = id + "\x1f" + c.key
		}
	}
	if m.cfg.Fence != nil {
		c.resource = m.cfg.Resource(r)
		c.fenceRes = c.resource
		if m.cfg.Identity != nil {
			// Length-prefixed, so no (identity, resource) pair names
			// another's fence.
			c.fenceRes = FenceResource(id, c.resource)
		}
	}
	ctx := r.Context()
	var err error
	if m.joined != nil {
		c.out, err = m.joined.BeginFenced(ctx, c.storeKey, fingerprint(r, c.body), m.cfg.LockTTL, m.cfg.Fence, c.fenceRes, c.holder)
		if err != nil && fenceRefusal(err) {
			return m.fenceEvent(c, err)
		}
	} else {
		c.out, err = m.cfg.Store.Begin(ctx, c.storeKey, fingerprint(r, c.body), m.cfg.LockTTL)
	}
	if err != nil {
		m.cfg.Logger.LogAttrs(ctx, slog.LevelError, "idempotency_store_failed", slog.String("op", "begin"), slog.Any("error", err))
		return evBeginFailed
	}
	switch c.out.State {
	case idemstore.StateNew, idemstore.StateInFlight, idemstore.StateMismatch, idemstore.StateCompleted:
	default:
		c.detail = "state " + c.out.State.String()
	}
	return evBegin
}

// checkIdentity refuses an identity no store can key by: bytes that are
// not valid UTF-8 (PostgreSQL's text refuses them) or a NUL byte (which
// no PostgreSQL text holds). Refused in the middleware, before any store,
// so that the answer does not depend on the store, and so that an input
// problem is not answered like an outage (503, retried). The log event
// gives the identity's length and the offset of the first bad byte, never
// the identity's bytes.
func (m *middleware) checkIdentity(c *call, id string) event {
	at, why := -1, ""
	for i := 0; i < len(id); {
		r, n := utf8.DecodeRuneInString(id[i:])
		if r == 0 || (r == utf8.RuneError && n == 1) {
			at, why = i, "a NUL byte"
			if r != 0 {
				why = "a byte that is not valid UTF-8"
			}
			break
		}
		i += n
	}
	if at < 0 {
		return evBegin
	}
	m.cfg.Logger.LogAttrs(c.r.Context(), slog.LevelError, "identity_invalid",
		slog.String("reason", why), slog.Int("identity_len", len(id)), slog.Int("offset", at))
	c.detail = fmt.Sprintf("Options.Identity returned %d bytes with %s at byte %d; an identity must be valid UTF-8 without NUL bytes", len(id), why, at)
	return evBadIdentity
}

// accept checks c's token against the Fence (raising it), unless there is
// none or a joined store did in BeginFenced.
func (m *middleware) accept(c *call) event {
	if m.cfg.Fence == nil || m.joined != nil {
		return evFenceAccepted
	}
	return m.fenceEvent(c, m.cfg.Fence.Accept(c.r.Context(), c.fenceRes, c.holder))
}

// fenceEvent classifies a fence store's answer.
func (m *middleware) fenceEvent(c *call, err error) event {
	var stale *fence.StaleTokenError
	switch {
	case err == nil:
		return evFenceAccepted
	case errors.As(err, &stale):
		c.current, c.closed = stale.Current, stale.ClosedBefore
		// Resource(r), not the identity-scoped name the store saw.
		shown := fence.StaleTokenError{Resource: c.resource, Scope: c.holder.Scope, Presented: c.holder.Token, Current: stale.Current, ClosedBefore: stale.ClosedBefore}
		c.detail = shown.Error()
		return evFenceStale
	case errors.Is(err, fence.ErrNoToken), errors.Is(err, idemstore.ErrInvalidFencing):
		c.detail = err.Error()
		return evFenceInvalid
	default:
		m.cfg.Logger.LogAttrs(c.r.Context(), slog.LevelError, "fence_store_failed", slog.String("resource", c.resource), slog.Any("error", err))
		return evFenceFailed
	}
}

// run calls the handler with c's body and holder, records its response and
// stores or releases the key.
func (m *middleware) run(w http.ResponseWriter, c *call) {
	ctx := c.r.Context()
	// The handler reads the parsed key with KeyFromContext, as a client
	// would have set it: the same key for its own downstream calls or
	// records (issue 37).
	hctx := WithIdempotencyKey(ctx, c.key)
	if c.fenced {
		hctx = fence.WithHolder(hctx, c.holder)
	}
	body := c.body
	r2 := c.r.WithContext(hctx)
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	rec := newRecorder(w, m.cfg.MaxResponseBytes)
	done := false
	defer func() {
		if !done { // the handler panicked: release the key, keep panicking
			m.after(ctx, c, rec, evPanicked)
		}
	}()
	m.next.ServeHTTP(rec, r2)
	done = true
	if rec.hijacked { // the connection is the handler's: nothing to store
		m.after(ctx, c, rec, evHijacked)
		return
	}
	if rec.status == 0 { // the handler wrote nothing: net/http sends 200
		rec.status, rec.header = http.StatusOK, rec.handlerHeader()
	}
	switch {
	case !m.cfg.Storable(rec.status):
		m.after(ctx, c, rec, evUnstorable)
	case rec.overflow:
		m.after(ctx, c, rec, evOverflow)
	case !rec.complete():
		m.after(ctx, c, rec, evIncomplete)
	default:
		m.after(ctx, c, rec, evStorable)
	}
}

// after takes the transition for what the handler did: store its response
// (or the problem that replaces it), or release the key.
func (m *middleware) after(ctx context.Context, c *call, rec *recorder, ev event) {
	tr := m.step(stateRunning, ev)
	if tr.action == actAbandon {
		m.abandon(ctx, c.storeKey, c.out.Lock)
		return
	}
	resp := &idemstore.Response{Status: rec.status, Header: rec.header, Body: rec.body.Bytes()}
	if tr.problem != "" {
		b := problemBody(problem.Details{
			Type:   m.cfg.ProblemBase + tr.problem,
			Title:  tr.title,
			Status: tr.status,
			Detail: notRetained(ev, rec.status, m.cfg.MaxResponseBytes),
		})
		resp = &idemstore.Response{Status: tr.status, Header: http.Header{"Content-Type": {problem.ContentType}}, Body: b}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.StoreTimeout)
	defer cancel()
	if err := m.cfg.Store.Complete(sctx, c.storeKey, c.out.Lock, resp, m.cfg.TTL); err != nil {
		m.cfg.Logger.LogAttrs(ctx, slog.LevelError, "idempotency_store_failed", slog.String("op", "complete"), slog.Any("error", err))
	}
}

// notRetained is the detail of the problem stored for a response that was
// not kept.
func notRetained(ev event, status int, limit int64) string {
	if ev == evIncomplete {
		return fmt.Sprintf("the request was processed (status %d) but its response did not reach the client in full and is not known whole, so it was not kept; it will not be processed again", status)
	}
	return fmt.Sprintf("the request was processed (status %d) but its response exceeded %d bytes and was not kept; it will not be processed again", status, limit)
}

// authenticated reports evBegin when the fencing headers of c may be
// admitted: with a Verifier, a valid signature over them is required;
// without one, an Identity or AllowUnauthenticatedFencing lets them in.
func (m *middleware) authenticated(c *call) event {
	r := c.r
	if m.cfg.Verifier == nil {
		if m.cfg.Identity != nil || m.cfg.AllowUnauthenticatedFencing {
			return evBegin
		}
		return m.signatureRefused(c, "", errSignature("this service admits fencing headers from authenticated callers only (Options.Verifier)"))
	}
	values := r.Header.Values(SignatureHeader)
	switch len(values) {
	case 0:
		return m.signatureRefused(c, "", errSignature(SignatureHeader+" required with fencing headers"))
	case 1:
	default:
		c.detail = "more than one field line"
		return evBadSignature
	}
	s := &signed{method: r.Method, target: serverTarget(r), key: c.key, holder: c.holder, bodySum: sha256.Sum256(c.body)}
	kid, err := m.cfg.Verifier.verify(values[0], s, m.cfg.Now(), m.cfg.MaxSignatureAge)
	switch {
	case errors.Is(err, ErrInvalidSignature):
		c.detail = err.Error()
		return evBadSignature
	case err != nil:
		return m.signatureRefused(c, kid, err)
	}
	return evBegin
}

// signatureRefused logs fencing_signature_rejected (resource, scope,
// presented token, key id and reason; never the owner) for the 403
// fencing-signature-rejected answer.
func (m *middleware) signatureRefused(c *call, kid string, why error) event {
	h := c.holder
	m.cfg.Logger.LogAttrs(c.r.Context(), slog.LevelWarn, "fencing_signature_rejected",
		slog.String("resource", m.cfg.Resource(c.r)), slog.String("scope", h.Scope),
		slog.Uint64("presented", uint64(h.Token)), slog.String("kid", kid), slog.String("reason", why.Error()))
	c.detail = why.Error()
	return evSignatureRejected
}

// retryAfterSeconds is the Retry-After value (RFC 9110 §10.2.3,
// delay-seconds) for a key whose lock holds it for left more: whole
// seconds rounded up, so a client that comes back then finds the lock
// gone (a handler still running has lost the key by then; see
// Options.LockTTL). A store that does not say (left 0) gets "1": the
// client polls.
func retryAfterSeconds(left time.Duration) string {
	secs := (left + time.Second - 1) / time.Second
	return strconv.FormatInt(max(int64(secs), 1), 10)
}

// plausible reports whether t is at most MaxTokenAhead ahead of the
// server's clock read as microseconds since the Unix epoch (always true
// when the check is off).
func (m *middleware) plausible(t fence.Token) bool {
	if m.cfg.MaxTokenAhead < 0 {
		return true
	}
	now := m.cfg.Now().UnixMicro()
	if now < 0 {
		now = 0
	}
	limit := uint64(now) + uint64(m.cfg.MaxTokenAhead/time.Microsecond)
	return uint64(t) <= limit
}

// readBody reads r's body within MaxBodyBytes.
func (m *middleware) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return []byte{}, nil
	}
	src := r.Body
	if m.cfg.MaxBodyBytes >= 0 {
		src = http.MaxBytesReader(w, r.Body, m.cfg.MaxBodyBytes)
	}
	return io.ReadAll(src)
}

// abandon releases the key so that a retry runs the handler.
func (m *middleware) abandon(ctx context.Context, key, lock string) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.StoreTimeout)
	defer cancel()
	if err := m.cfg.Store.Abandon(sctx, key, lock); err != nil {
		m.cfg.Logger.LogAttrs(ctx, slog.LevelError, "idempotency_store_failed", slog.String("op", "abandon"), slog.Any("error", err))
	}
}

// FenceResource is the resource name the middleware gives its Fence for a
// request's resource (Options.Resource) when Options.Identity is set, the
// identity being what Identity returned for the request ("" included):
// "<len(identity)>:<identity>:<resource>", length-prefixed so that no
// (identity, resource) pair names another's fence. Without
// Options.Identity the Fence sees the resource itself. Prune a Fence's
// slot scopes (fence.SlotScopePruner) under the name it sees.
func FenceResource(identity, resource string) string {
	return strconv.Itoa(len(identity)) + ":" + identity + ":" + resource
}
