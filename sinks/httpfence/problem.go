package httpfence

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/holdfast-go/holdfast/fence"
)

// DefaultProblemBase prefixes the problem type URIs the middleware sends
// (Options.ProblemBase).
const DefaultProblemBase = "https://holdfast.dev/problems/"

// Problem type names, appended to the problem base to form the "type"
// member of an RFC 9457 problem detail.
const (
	ProblemMissingKey       = "missing-idempotency-key"   // 400
	ProblemInvalidKey       = "invalid-idempotency-key"   // 400
	ProblemInvalidFencing   = "invalid-fencing-token"     // 400
	ProblemImplausibleToken = "implausible-fencing-token" // 400
	ProblemInvalidBody      = "invalid-body"              // 400
	ProblemRequestTooLarge  = "request-too-large"         // 413
	ProblemInFlight         = "request-in-flight"         // 409
	ProblemKeyReused        = "idempotency-key-reused"    // 422
	ProblemStaleToken       = "stale-fencing-token"       // 412
	ProblemNotRetained      = "response-not-retained"     // 410
	ProblemStoreUnavailable = "store-unavailable"         // 503
	problemContentType      = "application/problem+json"  // RFC 9457 §3
)

// Problem types of authenticated fencing (Options.Verifier).
const (
	// ProblemInvalidSignature (400): a Fencing-Signature that is not one
	// valid dictionary of kid, t and sig (ParseSignature), or repeated.
	ProblemInvalidSignature = "invalid-fencing-signature"
	// ProblemSignatureRejected (403): fencing headers without a signature
	// the Verifier accepts (missing, unknown key id, too old or too far
	// ahead, or over other values), or sent to a service that admits none
	// from unauthenticated callers. 403, not 401: the signature is no HTTP
	// authentication scheme with a challenge to send (RFC 9110 §15.5.2).
	ProblemSignatureRejected = "fencing-signature-rejected"
)

// Problem is an RFC 9457 problem detail as the middleware sends it. The
// stale-fencing-token problem fills the four extension members.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`

	Resource       string      `json:"resource,omitempty"`
	Scope          string      `json:"scope,omitempty"`
	CurrentToken   fence.Token `json:"currentToken,omitempty"`
	PresentedToken fence.Token `json:"presentedToken,omitempty"`
}

// writeProblem sends p with the problem media type.
func writeProblem(w http.ResponseWriter, p Problem) {
	b := problemBody(p)
	w.Header().Set("Content-Type", problemContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(p.Status)
	_, _ = w.Write(b)
}

// problemBody encodes p; a struct of strings and integers always encodes.
func problemBody(p Problem) []byte {
	b, _ := json.Marshal(p)
	return b
}

// maxProblemBytes bounds how much of a problem body the client reads.
const maxProblemBytes = 64 << 10

// readStale reports the stale-token error resp carries: a 412 with a problem
// body whose type ends in "/stale-fencing-token", whatever the base. It
// reads at most maxProblemBytes of the body and, when the answer is not a
// stale-token problem, puts them back so the caller can read the whole body.
func readStale(resp *http.Response) (*fence.StaleTokenError, bool) {
	p, ok := peekProblem(resp, http.StatusPreconditionFailed, ProblemStaleToken)
	if !ok {
		return nil, false
	}
	return &fence.StaleTokenError{Resource: p.Resource, Scope: p.Scope, Presented: p.PresentedToken, Current: p.CurrentToken}, true
}

// readInFlight reports whether resp is the middleware's in-flight answer: a
// 409 with a problem body whose type ends in "/request-in-flight", whatever
// the base. It reads the body as readStale does.
func readInFlight(resp *http.Response) bool {
	_, ok := peekProblem(resp, http.StatusConflict, ProblemInFlight)
	return ok
}

// peekProblem returns resp's problem when resp has status and a problem
// body whose type ends in "/" + typ. It reads at most maxProblemBytes of the
// body and puts them back, so the caller can still read the whole body.
func peekProblem(resp *http.Response, status int, typ string) (Problem, bool) {
	if resp.StatusCode != status {
		return Problem{}, false
	}
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != problemContentType {
		return Problem{}, false
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, maxProblemBytes))
	resp.Body = readCloser{io.MultiReader(bytes.NewReader(head), errReader{err}, resp.Body), resp.Body}
	var p Problem
	if err != nil || json.Unmarshal(head, &p) != nil || !strings.HasSuffix(p.Type, "/"+typ) {
		return Problem{}, false
	}
	return p, true
}

type readCloser struct {
	io.Reader
	io.Closer
}

// errReader returns err once when not nil, and io.EOF otherwise, so a read
// error met while peeking reaches the caller at the same offset.
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	return 0, io.EOF
}
