package problem

import "github.com/holdfast-go/holdfast/fence"

// ContentType is the media type of a problem detail (RFC 9457 §3).
const ContentType = "application/problem+json"

// DefaultBase prefixes the problem type URIs the middleware sends
// (Options.Base).
const DefaultBase = "https://holdfast.dev/problems/"

// Problem type names, appended to the problem base to form the "type"
// member of an RFC 9457 problem detail.
const (
	MissingKey       = "missing-idempotency-key"   // 400
	InvalidKey       = "invalid-idempotency-key"   // 400
	InvalidFencing   = "invalid-fencing-token"     // 400
	ImplausibleToken = "implausible-fencing-token" // 400
	InvalidBody      = "invalid-body"              // 400
	RequestTooLarge  = "request-too-large"         // 413
	InFlight         = "request-in-flight"         // 409
	KeyReused        = "idempotency-key-reused"    // 422
	StaleToken       = "stale-fencing-token"       // 412
	NotRetained      = "response-not-retained"     // 410
	StoreUnavailable = "store-unavailable"         // 503
	// InvalidIdentity (500): Options.Identity returned a value that is not
	// valid UTF-8 or holds a NUL byte, which no store can key by.
	InvalidIdentity = "invalid-identity" // 500
)

// Problem types of authenticated fencing (Options.Verifier).
const (
	// InvalidSignature (400): a Fencing-Signature that is not one
	// valid dictionary of kid, t and sig (httpfence.ParseSignature), or repeated.
	InvalidSignature = "invalid-fencing-signature"
	// SignatureRejected (403): fencing headers without a signature
	// the Verifier accepts (missing, unknown key id, too old or too far
	// ahead, or over other values), or sent to a service that admits none
	// from unauthenticated callers. 403, not 401: the signature is no HTTP
	// authentication scheme with a challenge to send (RFC 9110 §15.5.2).
	SignatureRejected = "fencing-signature-rejected"
)

// Details is an RFC 9457 problem detail as the middleware sends it. The
// stale-fencing-token problem fills the four extension members (five for
// a closed slot scope).
type Details struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`

	Resource       string      `json:"resource,omitempty"`
	Scope          string      `json:"scope,omitempty"`
	CurrentToken   fence.Token `json:"currentToken,omitempty"`
	PresentedToken fence.Token `json:"presentedToken,omitempty"`
	// ClosedBefore is set (RFC 3339, UTC) when the stale token was refused
	// because its scope is a slot scope the fence store closed
	// (fence.SlotScopePruner): slots before it are pruned, whatever the
	// token. CurrentToken is then absent.
	ClosedBefore string `json:"closedBefore,omitempty"`
}
