package httpfence

import (
	"net/http"

	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore"
	"github.com/holdfast-go/holdfast/sinks/httpfence/problem"
)

// The idempotency state machine of the middleware, as one table: for a
// key's state and an event, the action taken and the answer sent. The
// status table of the package documentation is checked against it
// (TestStatusTableMatchesDoc).
//
// States are those Store.Begin reports (State) plus three of the
// middleware's own: before the key is claimed, after Begin reported a state
// it does not know, and while the handler runs.
const (
	stateUnclaimed idemstore.State = -1 - iota // headers, body, signature; no key held
	stateOther                                 // Begin reported no known State
	stateRunning                               // the handler ran; the key is held
)

// event is what happened to a request at its key's state.
type event uint8

const (
	evNoKey             event = iota + 1 // no Idempotency-Key
	evBadKey                             // Idempotency-Key malformed or repeated
	evBadFencing                         // fencing headers malformed, or token 0
	evNoFencing                          // no fencing headers while a Fence is set
	evBodyTooLarge                       // body above MaxBodyBytes
	evBodyUnreadable                     // body could not be read
	evBadSignature                       // Fencing-Signature malformed or repeated
	evSignatureRejected                  // fencing headers not signed by a key holder
	evImplausible                        // token beyond MaxTokenAhead
	evBadIdentity                        // Identity(r) is not valid UTF-8 or holds a NUL byte
	evBegin                              // Begin reported the key's state
	evBeginFailed                        // Begin failed
	evFenceAccepted                      // the fence accepted the token (or there is none)
	evFenceStale                         // the fence holds a larger token
	evFenceInvalid                       // the fence store refused the token as malformed
	evFenceFailed                        // the fence store failed
	evStorable                           // the handler's response is kept for replay
	evOverflow                           // storable, but above MaxResponseBytes
	evIncomplete                         // storable, but a write to the client failed and the body is not known whole
	evHijacked                           // the handler took the connection over (http.Hijacker)
	evUnstorable                         // the handler's status is not storable
	evPanicked                           // the handler panicked
)

// action is what the middleware does on a transition.
type action uint8

const (
	actRefuse   action = iota + 1 // answer with the problem; no key held
	actRelease                    // release the key, answer with the problem
	actRetry                      // answer with the problem and Retry-After
	actFence                      // check the token against the Fence
	actRun                        // run the handler with the key held
	actReplay                     // answer with the stored response
	actComplete                   // store the response (the problem, if any, replaces it)
	actAbandon                    // release the key; the handler answered
)

// transition is one row of the state table. A problem row answers with
// status, the problem type and title.
type transition struct {
	state   idemstore.State
	event   event
	action  action
	status  int
	problem string
	title   string
}

// transitions is the state table, in the order of the documentation's
// status table (the order the middleware checks things in, except that the
// handler comes last).
var transitions = []transition{
	{stateUnclaimed, evNoKey, actRefuse, http.StatusBadRequest, problem.MissingKey, "Idempotency-Key header required"},
	{stateUnclaimed, evBadKey, actRefuse, http.StatusBadRequest, problem.InvalidKey, "Invalid Idempotency-Key header"},
	{stateUnclaimed, evBadFencing, actRefuse, http.StatusBadRequest, problem.InvalidFencing, "Invalid fencing headers"},
	{stateUnclaimed, evNoFencing, actRefuse, http.StatusBadRequest, problem.InvalidFencing, "Fencing-Token and Fencing-Owner headers required"},
	{stateUnclaimed, evBodyTooLarge, actRefuse, http.StatusRequestEntityTooLarge, problem.RequestTooLarge, "Request body too large"},
	{stateUnclaimed, evBodyUnreadable, actRefuse, http.StatusBadRequest, problem.InvalidBody, "Request body could not be read"},
	{stateUnclaimed, evBadSignature, actRefuse, http.StatusBadRequest, problem.InvalidSignature, "Invalid " + SignatureHeader + " header"},
	{stateUnclaimed, evSignatureRejected, actRefuse, http.StatusForbidden, problem.SignatureRejected, "Fencing headers not signed by a lease holder"},
	{stateUnclaimed, evImplausible, actRefuse, http.StatusBadRequest, problem.ImplausibleToken, "Fencing token implausibly far ahead of the server clock"},
	{stateUnclaimed, evBadIdentity, actRefuse, http.StatusInternalServerError, problem.InvalidIdentity, "Identity not usable as an idempotency scope"},

	{idemstore.StateMismatch, evBegin, actRefuse, http.StatusUnprocessableEntity, problem.KeyReused, "Idempotency-Key reused with a different request"},
	{idemstore.StateInFlight, evBegin, actRetry, http.StatusConflict, problem.InFlight, "A request with this Idempotency-Key is in progress"},
	// A replay wins over the fence check, but raises the fence first; a
	// stale token only means the fence is already past it.
	{idemstore.StateCompleted, evBegin, actFence, 0, "", ""},
	{idemstore.StateCompleted, evFenceAccepted, actReplay, 0, "", ""},
	{idemstore.StateCompleted, evFenceStale, actReplay, 0, "", ""},

	{idemstore.StateNew, evBegin, actFence, 0, "", ""},
	{idemstore.StateNew, evFenceStale, actRelease, http.StatusPreconditionFailed, problem.StaleToken, "Stale fencing token"},
	{idemstore.StateNew, evFenceInvalid, actRelease, http.StatusBadRequest, problem.InvalidFencing, "Fencing token not accepted by the store"},
	{idemstore.StateNew, evFenceFailed, actRelease, http.StatusServiceUnavailable, problem.StoreUnavailable, "Fence store unavailable"},
	{idemstore.StateCompleted, evFenceInvalid, actRefuse, http.StatusBadRequest, problem.InvalidFencing, "Fencing token not accepted by the store"},
	{idemstore.StateCompleted, evFenceFailed, actRefuse, http.StatusServiceUnavailable, problem.StoreUnavailable, "Fence store unavailable"},
	// A store that checks the fence in Begin's own step (FencedStore)
	// refuses before it claims the key.
	{stateUnclaimed, evFenceStale, actRefuse, http.StatusPreconditionFailed, problem.StaleToken, "Stale fencing token"},
	{stateUnclaimed, evFenceInvalid, actRefuse, http.StatusBadRequest, problem.InvalidFencing, "Fencing token not accepted by the store"},
	{stateUnclaimed, evBeginFailed, actRefuse, http.StatusServiceUnavailable, problem.StoreUnavailable, "Idempotency store unavailable"},
	{stateOther, evBegin, actRefuse, http.StatusServiceUnavailable, problem.StoreUnavailable, "Idempotency store unavailable"},

	{idemstore.StateNew, evFenceAccepted, actRun, 0, "", ""},

	// After the handler (described below the status table).
	{stateRunning, evStorable, actComplete, 0, "", ""},
	{stateRunning, evOverflow, actComplete, http.StatusGone, problem.NotRetained, "Response not retained"},
	{stateRunning, evIncomplete, actComplete, http.StatusGone, problem.NotRetained, "Response not retained"},
	{stateRunning, evHijacked, actAbandon, 0, "", ""},
	{stateRunning, evUnstorable, actAbandon, 0, "", ""},
	{stateRunning, evPanicked, actAbandon, 0, "", ""},
}

type stateEvent struct {
	state idemstore.State
	event event
}

// stateTable indexes transitions; built once per middleware.
func stateTable() map[stateEvent]transition {
	t := make(map[stateEvent]transition, len(transitions))
	for _, tr := range transitions {
		t[stateEvent{tr.state, tr.event}] = tr
	}
	return t
}

// step returns the transition for event e at state s; a state Begin should
// never report is stateOther.
func (m *middleware) step(s idemstore.State, e event) transition {
	if tr, ok := m.table[stateEvent{s, e}]; ok {
		return tr
	}
	return m.table[stateEvent{stateOther, evBegin}]
}
