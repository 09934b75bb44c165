package idemstore

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/errfamily"
)

// Store keeps one record per idempotency key: in flight (a handler is
// running under a lock) or completed (its response is kept for replay).
// Implementations: httpfencetest.NewMemoryStore (in memory, for tests), redisstore.NewStore and
// pgstore.NewStore in the subpackages. Every
// implementation must pass the package's conformance suite; the contract is:
//
//   - Begin is atomic per key. When no live record exists (never seen,
//     abandoned, or expired) it creates an in-flight record for fingerprint
//     under a new random lock that expires after lockTTL, and returns
//     StateNew with that lock. Otherwise it changes nothing and returns
//     StateMismatch when the record's fingerprint differs (in flight or
//     completed), StateInFlight when it is in flight, with the time its
//     lock still holds the key by the store's clock (Outcome.LockLeft),
//     and StateCompleted with the stored response when it is completed.
//   - Complete turns the in-flight record held under lock into a completed
//     one holding resp, kept for ttl from now. Abandon deletes the in-flight
//     record held under lock. Both return an error matching ErrLockLost, and
//     change nothing, when the record is gone or no longer holds lock (its
//     lockTTL passed; another request may have taken it over).
//   - Keys are opaque byte strings chosen by the middleware; the Postgres
//     store needs valid UTF-8 without NUL bytes.
//
// A nil ctx is refused with an error matching ErrNilContext by the stores
// of holdfast (httpfencetest.MemoryStore, redisstore.Store, pgstore.Store), before the
// store is touched.
//
// The middleware answers any other error of Begin (and of a FenceStore's
// Accept) with 503 store-unavailable, so a store resolves conflicts between
// concurrent requests itself rather than returning them: pgstore runs its
// statements at READ COMMITTED whatever the database's default isolation
// and retries a serialization failure or deadlock (SQLSTATE 40001, 40P01)
// inside the call, so concurrent requests for one key are answered 201,
// 409 or a replay, never 503 (docs/guarantees.md, "Postgres isolation
// levels").
type Store interface {
	Begin(ctx context.Context, key, fingerprint string, lockTTL time.Duration) (Outcome, error)
	Complete(ctx context.Context, key, lock string, resp *Response, ttl time.Duration) error
	Abandon(ctx context.Context, key, lock string) error
}

// FenceStore applies the fence acceptance rule at admission: it keeps per
// (resource, scope) the highest token accepted and its owner, scope being
// h.Scope, so that tokens of different leases are never compared. Accept
// returns nil and raises the scope's stored token (atomically with the
// check) when the rule accepts h, a *fence.StaleTokenError (Scope =
// h.Scope) when it refuses, an error matching fence.ErrNoToken for
// fence.None, one matching ErrInvalidFencing for a holder the store cannot
// take, and any other error when the store fails. Implementations:
// httpfencetest.NewMemoryFence (for tests), redisstore.NewFence and pgstore.NewFence in the
// subpackages; each passes sinktest.Exercise through sinktest.FenceSink,
// as every fenced sink of holdfast does.
type FenceStore interface {
	Accept(ctx context.Context, resource string, h fence.Holder) error
}

// FencedStore is a Store that can apply a FenceStore's rule in the same
// atomic step as Begin (pgstore.Store with a pgstore.Fence on the same
// database: one statement). Middleware uses BeginFenced in place of Begin
// followed by FenceStore.Accept when its Store is a FencedStore and
// JoinsFence(its Fence) reports true; the answers to the client are the
// same, with one round trip (and one commit) less per new key.
type FencedStore interface {
	Store
	// JoinsFence reports whether BeginFenced can apply fs's rule.
	JoinsFence(fs FenceStore) bool
	// BeginFenced is Begin with the fence check of the request applied to
	// h for resource (fs's fence, per (resource, h.Scope)) in the same
	// atomic step:
	//
	//   - no live record: the key is claimed (StateNew) iff fs accepts h,
	//     and fs's fence is raised with it. When fs refuses, nothing is
	//     claimed and the error is fs's: a *fence.StaleTokenError, or one
	//     matching fence.ErrNoToken or ErrInvalidFencing.
	//   - completed with the same fingerprint: StateCompleted, and fs's
	//     fence is raised when it accepts h; a stale h is no error (the
	//     replay wins), a holder fs cannot take is (ErrInvalidFencing).
	//   - in flight or another fingerprint: StateInFlight or
	//     StateMismatch; the fence is not touched.
	//
	// Any other error is the store's, as for Begin.
	BeginFenced(ctx context.Context, key, fingerprint string, lockTTL time.Duration, fs FenceStore, resource string, h fence.Holder) (Outcome, error)
}

// State is what Store.Begin found for a key.
type State int

// The outcomes of Store.Begin.
const (
	// StateNew: no live record existed; the caller holds the new in-flight
	// record under Outcome.Lock and must Complete or Abandon it.
	StateNew State = iota + 1
	// StateInFlight: another request with the same fingerprint holds the key.
	StateInFlight
	// StateMismatch: the key is live with another request fingerprint.
	StateMismatch
	// StateCompleted: the key completed; Outcome.Response is the stored one.
	StateCompleted
)

// String returns the state's name.
func (s State) String() string {
	switch s {
	case StateNew:
		return "new"
	case StateInFlight:
		return "in-flight"
	case StateMismatch:
		return "mismatch"
	case StateCompleted:
		return "completed"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Outcome is the result of Store.Begin.
type Outcome struct {
	State State
	// Lock identifies the in-flight record created by Begin (StateNew only).
	Lock string
	// LockLeft, for StateInFlight, is how long the record's lock still
	// holds the key, by the store's clock: at most the lockTTL it was
	// claimed with, at least 1 ms. Middleware answers it as Retry-After.
	// 0 means the store does not say (a Store of another module); the
	// stores of holdfast always fill it.
	LockLeft time.Duration
	// Response is the stored response (StateCompleted only).
	Response *Response
}

// Response is a stored response: replayed with the same status, header
// fields and body bytes.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// ErrLockLost is returned by Store.Complete and Store.Abandon when the
// record no longer holds the caller's lock: the in-flight lock expired
// (Options.LockTTL) and the key was abandoned, expired or taken
// over by another request.
var ErrLockLost = errors.New("httpfence: idempotency key lock lost")

// ErrInvalidFencing is matched by a FenceStore's error for a holder the
// store cannot take (a token above the bigint maximum or an owner, scope
// or resource a Postgres fence refuses, see pgstore): Middleware answers
// it with 400 (problem.InvalidFencing, "invalid-fencing-token"), not 503.
var ErrInvalidFencing = errors.New("httpfence: fencing not accepted by the store")

// ErrNilContext is returned, wrapped, by the methods of httpfencetest.MemoryStore,
// redisstore.Store and pgstore.Store called with a nil context, before
// the store is touched.
var ErrNilContext = fmt.Errorf("httpfence: %w", errfamily.ErrNilContext)
