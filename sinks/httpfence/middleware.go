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
	"time"

	"github.com/holdfast-go/holdfast/fence"
)

// Defaults for Options.
const (
	// DefaultMaxBodyBytes limits request bodies (larger: 413).
	DefaultMaxBodyBytes = 1 << 20
	// DefaultMaxResponseBytes limits the response body kept for replay.
	DefaultMaxResponseBytes = 1 << 20
	// DefaultTTL is how long a completed record is kept for replay.
	DefaultTTL = 24 * time.Hour
	// DefaultLockTTL is how long an in-flight record blocks its key when
	// the handler never finishes (the process crashed).
	DefaultLockTTL = time.Minute
	// DefaultStoreTimeout bounds Complete and Abandon after the handler.
	DefaultStoreTimeout = 5 * time.Second
	// DefaultMaxTokenAhead is how far ahead of the server's clock a token
	// may be (5 min), read as microseconds since the Unix epoch. A lease
	// token is max(counter+1, Redis TIME in µs): a healthy one is ahead of
	// the server's clock by the clock skew between Redis and the server
	// (well under a second with NTP) at most. 5 minutes leaves room for a
	// badly kept clock while a token that got past every other check can
	// block a fence for 5 minutes at most, not a day.
	DefaultMaxTokenAhead = 5 * time.Minute
)

// DefaultMethods are the methods the middleware applies to when
// Options.Methods is nil. Others pass through untouched.
var DefaultMethods = []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// Options configures Middleware. Only Store is required.
type Options struct {
	// Store keeps the idempotency records. Required.
	Store Store

	// Fence, when set, applies the fence acceptance rule to every request
	// that claims a new key: the request must then carry Fencing-Token and
	// Fencing-Owner (400 otherwise), and a stale token is answered with 412.
	// The fence is kept per (Resource(r), scope[, Identity(r)]), scope being
	// the Fencing-Scope header ("" when absent): tokens of different leases
	// are never compared. A replay of a completed key raises the fence with
	// its token too (see the package documentation). nil: tokens are parsed
	// (400 when malformed) and passed to the handler in the context, but
	// not checked.
	Fence FenceStore

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
	Identity func(r *http.Request) string

	// MaxTokenAhead refuses, with a 400 implausible-fencing-token problem,
	// a token larger than the server's clock (Now) in microseconds since the
	// Unix epoch plus MaxTokenAhead: a client that sends
	// Fencing-Token: 18446744073709551615 would otherwise fence a resource
	// for everyone for ever. It relies on the lease tokens' time floor
	// (package lease issues max(counter+1, Redis TIME in µs), so a healthy
	// token is about now in µs). Default DefaultMaxTokenAhead (5 min); -1
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
	// then a replay finds the original's record (and is answered from it)
	// rather than running the handler again. Default
	// DefaultMaxSignatureAge (5 min). Used with Verifier only.
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
	// (POST, PUT, PATCH, DELETE).
	Methods []string

	// MaxBodyBytes limits the request body, which is read in full to
	// fingerprint it (larger: 413). Default DefaultMaxBodyBytes (1 MiB);
	// -1: no limit.
	MaxBodyBytes int64

	// MaxResponseBytes limits the response body kept for replay. A larger
	// response still reaches the client in full, but is stored as a 410
	// response-not-retained problem: the handler does not run again for the
	// key. Default DefaultMaxResponseBytes (1 MiB); -1: no limit.
	MaxResponseBytes int64

	// TTL is how long a completed record is kept and replayed. Default
	// DefaultTTL (24 h).
	TTL time.Duration

	// LockTTL is how long an in-flight record holds its key. A request
	// whose handler runs longer than LockTTL loses the key: a retry may run
	// the handler a second time, and the late response is not stored.
	// Default DefaultLockTTL (1 min).
	LockTTL time.Duration

	// StoreTimeout bounds the store calls made after the handler returns
	// (Complete, Abandon), which run even when the client has gone away.
	// Default DefaultStoreTimeout (5 s).
	StoreTimeout time.Duration

	// Storable reports whether a response with the handler's status code is
	// stored for replay; when false the key is released and a retry runs the
	// handler again. Default DefaultStorable.
	Storable func(status int) bool

	// ProblemBase prefixes the problem type URIs. Default
	// DefaultProblemBase ("https://holdfast.dev/problems/").
	ProblemBase string

	// Logger receives stale_token_rejected and store failure events.
	// Default: discard.
	Logger *slog.Logger
}

// DefaultStorable stores every response below 500 except 408, 409, 425 and
// 429, which tell the client to come back: a retry of a 5xx or of one of
// these runs the handler again.
func DefaultStorable(status int) bool {
	switch status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
		return false
	}
	return status < 500
}

func (c Options) withDefaults() Options {
	if c.Resource == nil {
		c.Resource = func(r *http.Request) string { return r.URL.Path }
	}
	if c.MaxTokenAhead == 0 {
		c.MaxTokenAhead = DefaultMaxTokenAhead
	}
	if c.MaxSignatureAge == 0 {
		c.MaxSignatureAge = DefaultMaxSignatureAge
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Methods == nil {
		c.Methods = DefaultMethods
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxResponseBytes == 0 {
		c.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if c.TTL == 0 {
		c.TTL = DefaultTTL
	}
	if c.LockTTL == 0 {
		c.LockTTL = DefaultLockTTL
	}
	if c.StoreTimeout == 0 {
		c.StoreTimeout = DefaultStoreTimeout
	}
	if c.Storable == nil {
		c.Storable = DefaultStorable
	}
	if c.ProblemBase == "" {
		c.ProblemBase = DefaultProblemBase
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
	var joined FencedStore
	if fs, ok := cfg.Store.(FencedStore); ok && cfg.Fence != nil && fs.JoinsFence(cfg.Fence) {
		joined = fs
	}
	return func(next http.Handler) http.Handler {
		return &middleware{cfg: cfg, next: next, joined: joined}
	}, nil
}

type middleware struct {
	cfg  Options
	next http.Handler
	// joined is cfg.Store when it applies cfg.Fence in Begin's own step
	// (FencedStore); nil when Begin and Accept are separate calls.
	joined FencedStore
}

func (m *middleware) problem(w http.ResponseWriter, status int, typ, title, detail string) {
	writeProblem(w, Problem{Type: m.cfg.ProblemBase + typ, Title: title, Status: status, Detail: detail})
}

func (m *middleware) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !slices.Contains(m.cfg.Methods, r.Method) {
		m.next.ServeHTTP(w, r)
		return
	}

	// 1. Headers: key, then fencing token and owner.
	keys := r.Header.Values(KeyHeader)
	if len(keys) == 0 {
		m.problem(w, http.StatusBadRequest, ProblemMissingKey, "Idempotency-Key header required", "")
		return
	}
	if len(keys) > 1 {
		m.problem(w, http.StatusBadRequest, ProblemInvalidKey, "Invalid Idempotency-Key header", "more than one field line")
		return
	}
	key, err := ParseKey(keys[0])
	if err != nil {
		m.problem(w, http.StatusBadRequest, ProblemInvalidKey, "Invalid Idempotency-Key header", err.Error())
		return
	}
	holder, fenced, err := ParseFencing(r.Header)
	switch {
	case err != nil:
		m.problem(w, http.StatusBadRequest, ProblemInvalidFencing, "Invalid fencing headers", err.Error())
		return
	case fenced && holder.Token == fence.None:
		m.problem(w, http.StatusBadRequest, ProblemInvalidFencing, "Invalid fencing headers", fence.ErrNoToken.Error())
		return
	case !fenced && m.cfg.Fence != nil:
		m.problem(w, http.StatusBadRequest, ProblemInvalidFencing, "Fencing-Token and Fencing-Owner headers required", "")
		return
	}

	// 2. Body, read in full for the fingerprint and replayed to the handler.
	body, err := m.readBody(w, r)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			m.problem(w, http.StatusRequestEntityTooLarge, ProblemRequestTooLarge, "Request body too large",
				fmt.Sprintf("limit %d bytes", tooLarge.Limit))
			return
		}
		// The client went away or sent a broken body: nothing to store.
		m.problem(w, http.StatusBadRequest, ProblemInvalidBody, "Request body could not be read", err.Error())
		return
	}

	// 2b. Who sent the fencing headers: refused here, before any store is
	// touched, unless a key holder signed them (or the deployment opted
	// out).
	if fenced && !m.authenticated(w, r, key, holder, body) {
		return
	}
	// 2c. The token's ceiling, after the signature: a caller without a key
	// learns nothing from it. The detail leaves the server's clock out.
	if fenced && !m.plausible(holder.Token) {
		m.problem(w, http.StatusBadRequest, ProblemImplausibleToken, "Fencing token implausibly far ahead of the server clock",
			fmt.Sprintf("token %d is more than MaxTokenAhead (%v) ahead of the server's clock", holder.Token, m.cfg.MaxTokenAhead))
		return
	}

	// 3. The key: claim it, or answer from what holds it. A completed key
	// is replayed before the fence check, but raises the fence first.
	storeKey, id := key, ""
	if m.cfg.Identity != nil {
		if id = m.cfg.Identity(r); id != "" {
			// Keys are printable ASCII, so the last 0x1f splits the pair.
			storeKey = id + "\x1f" + key
		}
	}
	var resource, fenceResource string // what the client is told; what the fence store keys by
	if m.cfg.Fence != nil {
		resource = m.cfg.Resource(r)
		fenceResource = resource
		if m.cfg.Identity != nil {
			// Length-prefixed, so no (identity, resource) pair names
			// another's fence.
			fenceResource = strconv.Itoa(len(id)) + ":" + id + ":" + resource
		}
	}
	ctx := r.Context()
	var out Outcome
	if m.joined != nil {
		// Claim and fence check (or replay and fence raise) in one step.
		out, err = m.joined.BeginFenced(ctx, storeKey, fingerprint(r, body), m.cfg.LockTTL, m.cfg.Fence, fenceResource, holder)
		if err != nil && fenceRefusal(err) {
			m.fenceRefused(w, r, resource, holder, err)
			return
		}
	} else {
		out, err = m.cfg.Store.Begin(ctx, storeKey, fingerprint(r, body), m.cfg.LockTTL)
	}
	if err != nil {
		m.cfg.Logger.LogAttrs(ctx, slog.LevelError, "idempotency_store_failed", slog.String("op", "begin"), slog.Any("error", err))
		m.problem(w, http.StatusServiceUnavailable, ProblemStoreUnavailable, "Idempotency store unavailable", "")
		return
	}
	switch out.State {
	case StateInFlight:
		w.Header().Set("Retry-After", retryAfterSeconds(out.LockLeft))
		m.problem(w, http.StatusConflict, ProblemInFlight, "A request with this Idempotency-Key is in progress", "")
		return
	case StateMismatch:
		m.problem(w, http.StatusUnprocessableEntity, ProblemKeyReused, "Idempotency-Key reused with a different request", "")
		return
	case StateCompleted:
		// The replay wins over the fence check, but the presented token
		// still raises the fence: a newer holder retrying a completed key
		// must shut out the older holder's next new key. A refusal only
		// means the fence is already past this token. (A joined store
		// raised it in BeginFenced.)
		if m.cfg.Fence != nil && m.joined == nil {
			var stale *fence.StaleTokenError
			if err := m.cfg.Fence.Accept(ctx, fenceResource, holder); err != nil && !errors.As(err, &stale) {
				m.fenceRefused(w, r, resource, holder, err)
				return
			}
		}
		replay(w, out.Response)
		return
	case StateNew:
	default:
		m.problem(w, http.StatusServiceUnavailable, ProblemStoreUnavailable, "Idempotency store unavailable", "state "+out.State.String())
		return
	}

	// 4. The fence, for a new key (a joined store checked it in
	// BeginFenced).
	if m.cfg.Fence != nil && m.joined == nil {
		if err := m.cfg.Fence.Accept(ctx, fenceResource, holder); err != nil {
			m.abandon(ctx, storeKey, out.Lock)
			m.fenceRefused(w, r, resource, holder, err)
			return
		}
	}

	// 5. The handler, recorded; then store or release the key.
	hctx := ctx
	if fenced {
		hctx = fence.WithHolder(ctx, holder)
	}
	r2 := r.WithContext(hctx)
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	rec := &recorder{w: w, limit: m.cfg.MaxResponseBytes}
	done := false
	defer func() {
		if !done { // the handler panicked: release the key, keep panicking
			m.abandon(ctx, storeKey, out.Lock)
		}
	}()
	m.next.ServeHTTP(rec, r2)
	done = true
	m.finish(ctx, storeKey, out.Lock, rec)
}

// authenticated reports whether the fencing headers of r may be admitted,
// and answers the request when not: with a Verifier, a valid signature over
// them is required; without one, an Identity or AllowUnauthenticatedFencing
// lets them in.
func (m *middleware) authenticated(w http.ResponseWriter, r *http.Request, key string, h fence.Holder, body []byte) bool {
	if m.cfg.Verifier == nil {
		if m.cfg.Identity != nil || m.cfg.AllowUnauthenticatedFencing {
			return true
		}
		m.signatureRefused(w, r, h, "", errSignature("this service admits fencing headers from authenticated callers only (Options.Verifier)"))
		return false
	}
	values := r.Header.Values(SignatureHeader)
	switch len(values) {
	case 0:
		m.signatureRefused(w, r, h, "", errSignature(SignatureHeader+" required with fencing headers"))
		return false
	case 1:
	default:
		m.problem(w, http.StatusBadRequest, ProblemInvalidSignature, "Invalid "+SignatureHeader+" header", "more than one field line")
		return false
	}
	s := &signed{method: r.Method, target: serverTarget(r), key: key, holder: h, bodySum: sha256.Sum256(body)}
	kid, err := m.cfg.Verifier.verify(values[0], s, m.cfg.Now(), m.cfg.MaxSignatureAge)
	switch {
	case errors.Is(err, ErrInvalidSignature):
		m.problem(w, http.StatusBadRequest, ProblemInvalidSignature, "Invalid "+SignatureHeader+" header", err.Error())
		return false
	case err != nil:
		m.signatureRefused(w, r, h, kid, err)
		return false
	}
	return true
}

// signatureRefused answers 403 fencing-signature-rejected and logs
// fencing_signature_rejected (resource, scope, presented token, key id and
// reason; never the owner).
func (m *middleware) signatureRefused(w http.ResponseWriter, r *http.Request, h fence.Holder, kid string, why error) {
	m.cfg.Logger.LogAttrs(r.Context(), slog.LevelWarn, "fencing_signature_rejected",
		slog.String("resource", m.cfg.Resource(r)), slog.String("scope", h.Scope),
		slog.Uint64("presented", uint64(h.Token)), slog.String("kid", kid), slog.String("reason", why.Error()))
	m.problem(w, http.StatusForbidden, ProblemSignatureRejected, "Fencing headers not signed by a lease holder", why.Error())
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

// fenceRefused answers a request whose token the fence refused.
func (m *middleware) fenceRefused(w http.ResponseWriter, r *http.Request, resource string, h fence.Holder, err error) {
	var stale *fence.StaleTokenError
	switch {
	case errors.As(err, &stale):
		m.cfg.Logger.LogAttrs(r.Context(), slog.LevelWarn, "stale_token_rejected",
			slog.String("resource", resource), slog.String("scope", h.Scope), slog.String("owner_id", fence.OwnerID(h.Owner)),
			slog.Uint64("presented", uint64(h.Token)), slog.Uint64("current", uint64(stale.Current)))
		// Resource(r), not the identity-scoped name the store saw.
		shown := fence.StaleTokenError{Resource: resource, Scope: h.Scope, Presented: h.Token, Current: stale.Current}
		writeProblem(w, Problem{
			Type:           m.cfg.ProblemBase + ProblemStaleToken,
			Title:          "Stale fencing token",
			Status:         http.StatusPreconditionFailed,
			Detail:         shown.Error(),
			Resource:       resource,
			Scope:          h.Scope,
			CurrentToken:   stale.Current,
			PresentedToken: h.Token,
		})
	case errors.Is(err, fence.ErrNoToken), errors.Is(err, ErrInvalidFencing):
		m.problem(w, http.StatusBadRequest, ProblemInvalidFencing, "Fencing token not accepted by the store", err.Error())
	default:
		m.cfg.Logger.LogAttrs(r.Context(), slog.LevelError, "fence_store_failed", slog.String("resource", resource), slog.Any("error", err))
		m.problem(w, http.StatusServiceUnavailable, ProblemStoreUnavailable, "Fence store unavailable", "")
	}
}

// finish stores the recorded response for replay, or releases the key.
func (m *middleware) finish(ctx context.Context, key, lock string, rec *recorder) {
	if rec.status == 0 { // the handler wrote nothing: net/http sends 200
		rec.status, rec.header = http.StatusOK, rec.w.Header().Clone()
	}
	if !m.cfg.Storable(rec.status) {
		m.abandon(ctx, key, lock)
		return
	}
	resp := &Response{Status: rec.status, Header: rec.header, Body: rec.body.Bytes()}
	if rec.overflow {
		b := problemBody(Problem{
			Type:   m.cfg.ProblemBase + ProblemNotRetained,
			Title:  "Response not retained",
			Status: http.StatusGone,
			Detail: fmt.Sprintf("the request was processed (status %d) but its response exceeded %d bytes and was not kept; it will not be processed again", rec.status, m.cfg.MaxResponseBytes),
		})
		resp = &Response{Status: http.StatusGone, Header: http.Header{"Content-Type": {problemContentType}}, Body: b}
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.StoreTimeout)
	defer cancel()
	if err := m.cfg.Store.Complete(sctx, key, lock, resp, m.cfg.TTL); err != nil {
		m.cfg.Logger.LogAttrs(ctx, slog.LevelError, "idempotency_store_failed", slog.String("op", "complete"), slog.Any("error", err))
	}
}

// abandon releases the key so that a retry runs the handler.
func (m *middleware) abandon(ctx context.Context, key, lock string) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.StoreTimeout)
	defer cancel()
	if err := m.cfg.Store.Abandon(sctx, key, lock); err != nil {
		m.cfg.Logger.LogAttrs(ctx, slog.LevelError, "idempotency_store_failed", slog.String("op", "abandon"), slog.Any("error", err))
	}
}
