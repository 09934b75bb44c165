package httpfence

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/fence"
)

// SignatureHeader carries the HMAC-SHA256 signature of a request's fencing
// headers, made by a Transport with a Signer and checked by a Middleware
// with a Verifier. Its value is an RFC 8941 Dictionary of three members, in
// any order:
//
//	Fencing-Signature: kid="2026-12", t=1796774400, sig=:3q2+7w...=:
//
// kid (sf-string) names the key (Key.ID), t (sf-integer) is the signing
// time in seconds since the Unix epoch, sig (sf-binary) is the 32-byte
// HMAC-SHA256 (RFC 2104) over the signed fields. The signed fields are, in
// this order, each preceded by its length as a uvarint so that no two field
// lists share an encoding: the label "holdfast-fencing-signature-v1", kid,
// t in decimal, the method, the request target (path and query, as sent),
// the idempotency key (unquoted; "" when absent), the scope, the token in
// decimal, the owner, and the SHA-256 of the body in lower-case hex.
//
// The target is the request line's path and query as the client sent
// them: a proxy or gateway between client and service that rewrites them
// (a stripped prefix, a normalised path) breaks every signature (403). The
// host is not covered, so that gateways may rewrite it. A Transport never
// signs a request made to follow a redirect, and sends no fencing headers
// at all after a redirect to another origin (see Transport.Signer): a
// redirecting host cannot obtain a signature for a request of its choosing.
const SignatureHeader = "Fencing-Signature"

// Limits of Key.
const (
	// MinSecretBytes is the shortest Key.Secret accepted: 32 bytes, the
	// HMAC-SHA256 block's half and the hash's size (RFC 2104 §3).
	MinSecretBytes = 32
	// MaxKeyIDLen is the longest Key.ID accepted.
	MaxKeyIDLen = 64
)

// defaultMaxSignatureAge is how far a signature's time may be from the
// server's clock, either way (Options.MaxSignatureAge): 5 minutes.
const defaultMaxSignatureAge = 5 * time.Minute

// signatureLabel starts every signed message: a version, and a domain
// separation from any other use of the same key.
const signatureLabel = "holdfast-fencing-signature-v1"

// ErrInvalidSignature matches every error about a Fencing-Signature value
// that is not a valid dictionary of kid, t and sig (ParseSignature).
var ErrInvalidSignature = errors.New("httpfence: invalid fencing signature")

// ErrInvalidSigningKey matches the errors of NewSigner and NewVerifier for a
// Key they cannot use.
var ErrInvalidSigningKey = errors.New("httpfence: invalid signing key")

// Key is one HMAC-SHA256 key that the lease holders (Transport.Signer) and
// the service (Options.Verifier) share. Only a party that knows Secret can
// present a fencing token the service admits: give it to the replicas that
// hold the leases, and to nobody else. Load it from a secret store; never
// put it in source, logs or command lines. fmt (every verb) and slog print
// a Key, a Signer and a Verifier (values or pointers) as their key ids with
// the secret "[redacted]" ({ID:"2026-12" Secret:[redacted]}). A Key kept
// in an unexported struct field is the exception: fmt prints such a field
// by reflection, Secret included, and no type can prevent it; drop the Key
// once NewSigner or NewVerifier has copied it (a Signer or Verifier keeps
// its secret where reflection cannot reach it).
type Key struct {
	// ID names the key in every signature (kid), so that the service can
	// hold several keys during a rotation: 1 to MaxKeyIDLen bytes of
	// letters, digits, '.', '_' and '-'. Not secret.
	ID string
	// Secret is the key: at least MinSecretBytes (32) random bytes.
	Secret []byte
}

func (k Key) validate() error {
	if k.ID == "" || len(k.ID) > MaxKeyIDLen {
		return fmt.Errorf("%w: ID %q: want 1 to %d bytes", ErrInvalidSigningKey, k.ID, MaxKeyIDLen)
	}
	for i := 0; i < len(k.ID); i++ {
		if !keyIDByte(k.ID[i]) {
			return fmt.Errorf("%w: ID %q: byte 0x%02x; want letters, digits, '.', '_' and '-'", ErrInvalidSigningKey, k.ID, k.ID[i])
		}
	}
	if len(k.Secret) < MinSecretBytes {
		return fmt.Errorf("%w: key %q: Secret of %d bytes; want at least %d", ErrInvalidSigningKey, k.ID, len(k.Secret), MinSecretBytes)
	}
	return nil
}

func keyIDByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-'
}

// Signer signs the fencing headers a Transport sends with one Key. Make it
// with NewSigner; safe for concurrent use.
type Signer struct {
	id     string
	secret secretBytes
}

// secretBytes returns a key's secret: a closure, because fmt prints a
// Signer or Verifier kept in an unexported field (where it cannot call
// Format) by reflection, which shows a func as an address and cannot reach
// what it captured.
type secretBytes func() []byte

// hold returns the secretBytes of a copy of secret.
func hold(secret []byte) secretBytes {
	b := append([]byte(nil), secret...)
	return func() []byte { return b }
}

// NewSigner returns a Signer with a copy of k, or an error matching
// ErrInvalidSigningKey.
func NewSigner(k Key) (*Signer, error) {
	if err := k.validate(); err != nil {
		return nil, err
	}
	return &Signer{id: k.ID, secret: hold(k.Secret)}, nil
}

// Verifier holds the keys a Middleware accepts signatures from
// (Options.Verifier). Make it with NewVerifier; safe for concurrent use.
type Verifier struct {
	keys map[string]secretBytes
}

// NewVerifier returns a Verifier that accepts signatures made with any of
// keys (copied). To rotate, list the new key beside the old one, move the
// signers to the new key, then drop the old one. It returns an error
// matching ErrInvalidSigningKey when keys is empty, a key is invalid or two
// keys share an ID.
func NewVerifier(keys ...Key) (*Verifier, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: NewVerifier needs at least one key", ErrInvalidSigningKey)
	}
	v := &Verifier{keys: make(map[string]secretBytes, len(keys))}
	for _, k := range keys {
		if err := k.validate(); err != nil {
			return nil, err
		}
		if _, dup := v.keys[k.ID]; dup {
			return nil, fmt.Errorf("%w: two keys with ID %q", ErrInvalidSigningKey, k.ID)
		}
		v.keys[k.ID] = hold(k.Secret)
	}
	return v, nil
}

// signed is what a signature covers, besides the key and the time.
type signed struct {
	method, target, key string
	holder              fence.Holder
	bodySum             [sha256.Size]byte
}

// mac computes the signature of s with secret under kid at unix second t.
func (s *signed) mac(secret []byte, kid string, t int64) []byte {
	m := hmac.New(sha256.New, secret)
	bodyHex := make([]byte, 2*sha256.Size)
	const hexDigits = "0123456789abcdef"
	for i, b := range s.bodySum {
		bodyHex[2*i], bodyHex[2*i+1] = hexDigits[b>>4], hexDigits[b&0xf]
	}
	for _, part := range []string{signatureLabel, kid, strconv.FormatInt(t, 10), s.method, s.target, s.key,
		s.holder.Scope, s.holder.Token.String(), s.holder.Owner} {
		writePart(m, []byte(part))
	}
	writePart(m, bodyHex)
	return m.Sum(nil)
}

func writePart(h hash.Hash, part []byte) {
	var n [binary.MaxVarintLen64]byte
	h.Write(n[:binary.PutUvarint(n[:], uint64(len(part)))])
	h.Write(part)
}

// header returns the Fencing-Signature value for s signed at t.
func (sg *Signer) header(s *signed, t time.Time) string {
	unix := t.Unix()
	sig := s.mac(sg.secret(), sg.id, unix)
	return `kid="` + sg.id + `", t=` + strconv.FormatInt(unix, 10) + ", sig=:" + base64.StdEncoding.EncodeToString(sig) + ":"
}

// errSignature is why a Verifier refused a signature, told to the client in
// the 403 problem's detail and logged; it never holds the owner or a key.
type errSignature string

func (e errSignature) Error() string { return string(e) }

// verify checks the Fencing-Signature value v of s at now, within maxAge
// either way.
func (v *Verifier) verify(value string, s *signed, now time.Time, maxAge time.Duration) (kid string, err error) {
	sig, err := ParseSignature(value)
	if err != nil {
		return "", err
	}
	secret, ok := v.keys[sig.KeyID]
	if !ok {
		return sig.KeyID, errSignature("unknown key id")
	}
	// The MAC first: a caller without the key learns nothing else.
	if !hmac.Equal(s.mac(secret(), sig.KeyID, sig.Time), sig.MAC) {
		return sig.KeyID, errSignature("signature does not match the request")
	}
	if d := now.Sub(time.Unix(sig.Time, 0)); d > maxAge || d < -maxAge {
		return sig.KeyID, errSignature(fmt.Sprintf("signed at %d, more than MaxSignatureAge (%v) from the server's clock", sig.Time, maxAge))
	}
	return sig.KeyID, nil
}

// Signature is a parsed Fencing-Signature value.
type Signature struct {
	KeyID string // kid
	Time  int64  // t: seconds since the Unix epoch
	MAC   []byte // sig: sha256.Size bytes
}

// ParseSignature parses a Fencing-Signature field value: an RFC 8941
// Dictionary (§4.2.2) with exactly the members kid (a String that is a
// valid Key.ID), t (a non-negative Integer) and sig (a Byte Sequence of 32
// bytes), in any order, separated by commas with optional spaces or tabs.
// Parameters, other members and repeated members are refused (a signature
// has no use for them, and a strict parser leaves no room to smuggle).
// Errors match ErrInvalidSignature.
func ParseSignature(v string) (Signature, error) {
	var (
		sig                Signature
		seenK, seenT, seen bool
	)
	fail := func(format string, args ...any) (Signature, error) {
		return Signature{}, fmt.Errorf("%w: "+format, append([]any{ErrInvalidSignature}, args...)...)
	}
	rest := strings.Trim(v, " \t")
	if rest == "" {
		return fail("empty")
	}
	for {
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 {
			return fail("member without a value")
		}
		name := rest[:eq]
		rest = rest[eq+1:]
		end := strings.IndexByte(rest, ',')
		if end < 0 {
			end = len(rest)
		}
		val := strings.TrimRight(rest[:end], " \t")
		switch name {
		case "kid":
			if seenK {
				return fail("kid repeated")
			}
			seenK = true
			id, err := parseString(val, MaxKeyIDLen)
			if err != nil {
				return fail("kid: %v", err)
			}
			for i := 0; i < len(id); i++ {
				if !keyIDByte(id[i]) {
					return fail("kid: byte 0x%02x", id[i])
				}
			}
			sig.KeyID = id
		case "t":
			if seenT {
				return fail("t repeated")
			}
			seenT = true
			if val == "" || len(val) > 15 || strings.Trim(val, "0123456789") != "" {
				return fail("t: want 1 to 15 decimal digits")
			}
			sig.Time, _ = strconv.ParseInt(val, 10, 64) // 15 digits always fit
		case "sig":
			if seen {
				return fail("sig repeated")
			}
			seen = true
			if len(val) < 2 || val[0] != ':' || val[len(val)-1] != ':' {
				return fail("sig: want a byte sequence :base64:")
			}
			b, err := base64.StdEncoding.Strict().DecodeString(val[1 : len(val)-1])
			if err != nil {
				return fail("sig: %v", err)
			}
			if len(b) != sha256.Size {
				return fail("sig: %d bytes, want %d", len(b), sha256.Size)
			}
			sig.MAC = b
		default:
			return fail("unknown member %q", name)
		}
		if end == len(rest) {
			break
		}
		rest = strings.TrimLeft(rest[end+1:], " \t")
		if rest == "" {
			return fail("trailing comma")
		}
	}
	if !seenK || !seenT || !seen {
		return fail("want members kid, t and sig")
	}
	return sig, nil
}

// serverTarget is the request target a client signed: the request line's
// path and query as received (untouched by handlers such as
// http.StripPrefix that rewrite r.URL), or r.URL's when the request did not
// come from a server (tests calling ServeHTTP directly).
func serverTarget(r *http.Request) string {
	t := r.RequestURI
	switch {
	case t == "":
		return r.URL.RequestURI()
	case t[0] == '/':
		return t
	}
	if u, err := url.Parse(t); err == nil && u.IsAbs() { // absolute-form, through a proxy
		return u.RequestURI()
	}
	return t
}
