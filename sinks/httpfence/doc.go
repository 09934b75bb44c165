// Package httpfence carries fencing tokens and idempotency keys over HTTP:
// a client http.RoundTripper (Transport) that sends them and retries safely,
// and a server middleware (Middleware) that runs each keyed request's handler
// at most once, replays its response to retries, and refuses stale tokens.
//
// # Model
//
// A job that calls another service across the network has two problems a
// lease cannot solve. A retry after a lost response (timeout, connection
// reset) must not repeat the effect; and a holder that paused past its lease
// TTL must not get its late call accepted after a newer holder's.
//
// The client sends, with every attempt of one logical operation:
//
//	Idempotency-Key: "settle:2026-03-08T02:00:00Z:eu"   (RFC 8941 sf-string)
//	Fencing-Token:   1780000000000042                   (decimal uint64)
//	Fencing-Owner:   "9f3c2e..."                         (sf-string)
//	Fencing-Scope:   "settle|eu"                         (sf-string; absent for scope "")
//	Fencing-Scope:   %"settle|z%c3%bcrich"               (RFC 9651 Display String, for a
//	                                                     scope outside printable ASCII)
//
// taken from the request's context: WithIdempotencyKey for the key (the
// scheduler's Run.IdempotencyKey), fence.WithHolder for the token, owner and
// scope (Run.Holder(); a lease's or a run's context carries it already). The Idempotency-Key header follows
// draft-ietf-httpapi-idempotency-key-header (IETF HTTPAPI working group):
// an Item Structured Header Field whose value is a String; parameters are
// refused.
//
// The server keeps one record per key (scoped by Options.Identity)
// in a Store: in flight under a lock while the handler runs, then completed
// with the response. The record holds a fingerprint of the request (method,
// path, query, body; not the headers, hence neither key nor token, nor
// the Host), so a key reused for another request is detected. Keys are
// per store (its prefix or table) and per Identity: services or virtual
// hosts that share a store and set no Identity share their keys, and a
// request to one is answered with the other's stored response. Give each
// its own prefix (redisstore.Options.Prefix) or table, or an Identity.
//
// # Status table
//
// For a request whose method is in Options.Methods (matched without regard
// to case), in this order:
//
//	400 missing-idempotency-key   no Idempotency-Key
//	400 invalid-idempotency-key   not one valid sf-string of 1-255 printable ASCII bytes
//	400 invalid-fencing-token     malformed Fencing-Token, Fencing-Owner or
//	                              Fencing-Scope, token 0, or no token while a
//	                              Fence store is configured
//	413 request-too-large         body above MaxBodyBytes (default 1 MiB)
//	400 invalid-body              the body could not be read (the client went away
//	                              or sent a broken body)
//	400 invalid-fencing-signature with a Verifier: a malformed or repeated
//	                              Fencing-Signature
//	403 fencing-signature-rejected fencing headers without a signature the
//	                              Verifier accepts (missing, unknown key id,
//	                              more than MaxSignatureAge off, or over other
//	                              values), or, with neither Verifier nor
//	                              Identity, from any caller unless
//	                              AllowUnauthenticatedFencing; no store is
//	                              touched
//	400 implausible-fencing-token token more than MaxTokenAhead (default 5 min)
//	                              ahead of the server clock in µs; checked
//	                              after the signature, so a caller without a
//	                              key learns nothing from it
//	500 invalid-identity          Options.Identity returned bytes that are not
//	                              valid UTF-8 or hold a NUL byte (a server
//	                              configuration error); no store is touched,
//	                              and identity_invalid is logged
//	422 idempotency-key-reused    key live with another fingerprint (in flight or completed)
//	409 request-in-flight         key in flight with this fingerprint (Retry-After: the lock's remaining seconds, rounded up)
//	(stored status)               key completed: the stored status, header fields and
//	                              body bytes, without running the handler; a replay
//	                              wins over the fence check, but raises the fence
//	                              with its token first (see Fencing)
//	412 stale-fencing-token       new key, Fence refuses the token (members resource,
//	                              scope, currentToken, presentedToken; closedBefore,
//	                              RFC 3339, for a slot scope the Fence closed, and the
//	                              client's error then matches fence.ErrScopeClosed);
//	                              the key is released
//	503 store-unavailable         a store call failed; the key is released
//	(handler's)                   otherwise: the handler runs once, with the holder
//	                              in its context (fence.HolderFromContext)
//
// The middleware's state table (states.go) is checked against this one by a
// test.
//
// Problems are RFC 9457 application/problem+json documents whose type is
// Options.ProblemBase (default "https://holdfast.dev/problems/")
// followed by the name above.
//
// After the handler: a response whose status DefaultStorable accepts (every
// status below 500 except 408, 409, 412, 425 and 429) is stored for TTL
// (default 24 h) and replayed to retries; any other (5xx above all) releases
// the key, so a retry runs the handler again. A handler that fences its own
// write and refuses an old holder (412 stale-fencing-token, or 409) thus
// leaves the key free for the current holder, exactly as the middleware's
// own 412 does: stored, the refusal would be replayed to the current holder
// sending the same slot's key, and the slot would never run. A panicking handler releases the key
// too. A response body above MaxResponseBytes still reaches the client but
// is stored as a 410 response-not-retained problem. What is stored is the
// response the handler wrote, whether or not its client took it: a client
// that went away mid-response makes the writes fail, and its retry gets
// the whole response when the handler wrote every byte of the
// Content-Length it declared; without a declared length (or with fewer
// bytes), a body cut at the failed write cannot be told from a whole one,
// and the response is stored as the same 410 problem: processed, not run
// again, never replayed cut. Header fields are stored as the handler left
// them; fields a middleware around this one set before it (a request id, a
// session cookie) and the handler left unchanged are not stored, so a
// replay to another request never repeats them. A handler that hijacks
// the connection (http.Hijacker) answers on it itself: nothing is stored,
// and the key is released.
//
// # Fencing
//
// With Options.Fence, a request that claims a new key must present
// a token the FenceStore accepts under the rule of package fence (token >
// stored, or equal from the stored owner); the store raises its token in the
// same atomic step (a Lua script in Redis, one INSERT ... ON CONFLICT in
// Postgres through sinks/pgfence). The Transport turns the resulting 412
// into a *fence.StaleTokenError.
//
// The fence is kept per (Resource(r), scope), scope being Fencing-Scope (""
// when the header is absent), and per Identity(r) when Identity is set. A
// token is only ever compared with tokens of the same lease: the partitions
// of a scheduler job calling one endpoint (scopes "job|tenant-a",
// "job|tenant-b", ...) never refuse each other, and a stale holder of one
// partition is still refused. Clients that want several leases fenced
// against each other send one shared scope on purpose.
//
// A replay of a completed key is answered before the fence check, but its
// token still raises the fence (a refusal of the raise is ignored: the
// fence is already past it). Otherwise a newer holder (token 8) retrying a
// completed key would leave the fence at the older token (7), and the older
// holder's next request with a new key would be admitted: a second effect.
//
// Identity and ceiling (see also Authenticated fencing): with
// Options.Identity set, keys and fences
// are per identity, so no client can fence a resource for another; the
// identity must be the same for every replica of a client (a tenant, a
// service), or the replicas do not fence each other. Lease
// tokens carry a time floor (max(counter+1, Redis TIME in µs), package
// lease), so a token far ahead of the server's clock is refused (400
// implausible-fencing-token) rather than letting one request with
// Fencing-Token: 18446744073709551615 fence a resource for ever; set
// MaxTokenAhead to -1 for tokens that are plain counters.
//
// # Authenticated fencing
//
// The fence rule admits the highest token, so whoever can present a token
// can move a fence: one request with a token an hour ahead and any owner
// would make every real holder's request stale for that hour. The
// middleware therefore admits fencing headers only from a caller it can
// tell is a lease holder. The documented setup shares an HMAC key (Key)
// between the holders and the service:
//
//	key := httpfence.Key{ID: "2026-12", Secret: secretFromVault} // >= 32 random bytes
//	signer, _ := httpfence.NewSigner(key)     // the job's replicas
//	client := &http.Client{Transport: &httpfence.Transport{Signer: signer}}
//	verifier, _ := httpfence.NewVerifier(key) // the service; list two keys while rotating
//	mw, _ := httpfence.Middleware(httpfence.Options{Store: store, Fence: fnc, Verifier: verifier})
//
// The Transport adds Fencing-Signature (SignatureHeader): an HMAC-SHA256
// (RFC 2104) under the key named by kid, at time t, over the scope, token,
// owner, idempotency key, method, request target and body hash. The
// middleware refuses fencing headers without a valid signature (403) before
// any store is touched, so a caller without the key cannot move a fence,
// whatever token it sends. Rotation: list the new key beside the old one in
// NewVerifier, move the signers, drop the old key.
//
// Redirects: a request an http.Client makes to follow a redirect is never
// signed (its target is the redirecting server's choice, not the
// holder's), and after a redirect to another origin (scheme, host, port)
// it carries no Fencing-Token, Fencing-Owner or Fencing-Scope at all. So a
// host the job calls cannot answer 307 Location: https://payments/... and
// have the holder sign a request of its choosing; a same-origin redirect
// of a fenced write is refused (403) by a Verifier: call the final URL.
//
// A captured signed request (from a log of request headers, say) can be
// replayed as is, for MaxSignatureAge (default 5 min) of its signing time,
// and to nothing else: another token, scope, owner, key, resource or body
// breaks the signature. A signature is admitted from MaxSignatureAge
// before to MaxSignatureAge after its time (a signer's clock may be ahead
// or behind), so for 2*MaxSignatureAge of server time; since Middleware
// requires TTL >= 2*MaxSignatureAge, and a record's TTL starts when it
// completes, after the original arrived, such a replay by the original's
// identity (the same Identity(r); every caller when Identity is not set)
// finds the original's record and gets its stored answer (or 409,
// or, when the original failed with a status that is not stored, runs the
// same request the holder would have retried). It cannot raise a fence
// past the holder's own token.
//
// Not guaranteed: with Identity and a Verifier both set, a replay by
// another authenticated identity within MaxSignatureAge finds no record,
// since keys and fences are per identity; the signature does not cover the
// identity, so it is admitted, and the handler runs once more, under that
// identity's key and fence, with the original holder's token and owner in
// its context. Mitigations: keep the fencing headers (Fencing-Signature
// above all) out of logs, use TLS, keep MaxSignatureAge short, and give
// each identity a signing key of its own (all listed in the Verifier) with
// a handler wrapping the middleware, after authentication, that refuses a
// request whose Fencing-Signature kid (ParseSignature(...).KeyID) is not
// the authenticated caller's key. TestReplayByAnotherIdentityIsNotDeduplicated
// pins this behaviour.
//
// A key holder can still present any token: the key is a write capability,
// like the owner, for the holders only. TLS keeps both off the wire.
//
// Without a Verifier, Identity (fences per authenticated client) is the
// other way to keep clients from fencing each other. A Fence with neither
// is refused by Middleware unless AllowUnauthenticatedFencing is set, for
// services whose every client is trusted; without a Fence, fencing headers
// from unauthenticated callers are refused rather than handed to the
// handler (which may fence its own writes with them). MaxTokenAhead
// (default 5 min, near the real clock skew of a time-floored lease token)
// bounds what a token that gets through can block.
//
// A fence poisoned anyway (before upgrading, or by a leaked key) is
// inspected and reset with holdfast fence get pg and holdfast fence reset pg
// when it is pgstore's (the pgfence guard table); redisstore's Fence is not
// read by the CLI and is reset by hand (docs/operations.md, "A poisoned
// fence").
//
// Idempotency keys and callers: without Options.Identity, a key is shared
// by every caller of the service. With a Fence, a request without fencing
// headers is refused (400) before its key is claimed, so only callers
// whose fencing headers are admitted (signers, with a Verifier) claim
// keys; with no Fence, any caller that knows or guesses a
// job's key (the scheduler's Run.IdempotencyKey is derived from the job
// and slot) can claim it first, and the job's own request then gets that
// caller's stored answer, or 422 for another body, and never runs. The
// idempotency-key draft makes keys unique per client: set Identity to the
// authenticated caller (a tenant, a calling service) to scope them.
//
// # Guarantees
//
//   - While a key's record lives (LockTTL while in flight, TTL once
//     completed), the handler runs at most once for it per identity, and
//     every retry gets the 409, 422 or the byte-identical stored response.
//   - The middleware admits, per (resource, scope[, identity]), tokens in
//     non-decreasing order under the acceptance rule: a request whose token
//     was stale when it arrived never reaches the handler, and a replay
//     raises the fence like an admission.
//   - The Transport never sends a non-idempotent request (POST, PATCH, ...)
//     without a key twice, always resends with the same key, and never
//     resends a body it cannot rewind.
//   - A key left in flight by a server that crashed mid-request costs a
//     client no attempt: the 409 says how long the lock still holds
//     (Retry-After, the store's Outcome.LockLeft rounded up to whole
//     seconds); the Transport waits it out within MaxInFlightWait (keep it
//     above LockTTL) and the request's deadline, or returns an
//     *InFlightError whose RetryAfter the scheduler defers to without
//     counting a failure (see scheduler.RetryAfter).
//
// # Non-guarantees
//
//   - The fence is checked at admission, not when the handler's effect
//     lands: a request admitted with token 5 can still be running when one
//     with token 6 is admitted. To fence the effect itself, use the token in
//     the handler's own write (pgfence.Guard.Check in the handler's
//     transaction; pgstore.Fence.Guard shares the guard table).
//   - A handler that outlives LockTTL loses its key: a retry may run it
//     again, and its response is not stored. Choose LockTTL above the
//     handler's worst-case time.
//   - A crash after the effect but before the response was stored leaves
//     the key in flight until LockTTL passes; then a retry runs the handler
//     again. Only an effect committed in the same database transaction as
//     the record could close that gap, which a generic middleware cannot.
//   - Records expire: a retry after TTL runs the handler again. A Redis
//     store that loses data (restart without persistence, failover,
//     eviction) forgets keys and tokens the same way.
//   - Trailers, hijacked connections (WebSocket) and 1xx responses are not
//     stored.
//
// # Stores
//
// Store and FenceStore each have a Redis implementation in package
// sinks/httpfence/redisstore (NewStore, NewFence: one Lua script per
// operation, one key per record, hash tagged, so Redis Cluster works), a
// PostgreSQL one in sinks/httpfence/pgstore (NewStore with an embedded
// idempotent migration, NewFence on sinks/pgfence), and an in-memory one
// in sinks/httpfence/httpfencetest for tests and examples (NewMemoryStore,
// NewMemoryFence). The stores
// live in subpackages so that this package imports neither go-redis nor
// pgx. A FenceStore that cannot take a holder (pgstore's bigint limit)
// returns an error matching ErrInvalidFencing, which the middleware
// answers with 400. A Store that can apply the Fence in Begin's own step
// implements FencedStore (pgstore's Store with a Fence on the same pool:
// one statement); the middleware then uses it, with the same answers and
// one round trip less per new key.
package httpfence
