package httpfence

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/safe"
)

// Header names. The Idempotency-Key header follows
// draft-ietf-httpapi-idempotency-key-header; Fencing-Token carries the
// token in decimal (fence.Token.String, fence.ParseToken); Fencing-Owner carries the owner that presents the token
// so that the server can apply the equal-token-same-owner half of the
// acceptance rule; Fencing-Scope carries the token's scope (the lease name
// it was issued for, fence.Holder.Scope) as an RFC 8941 sf-string (an RFC
// 9651 Display String outside printable ASCII, see FormatScope), so that
// the server compares the token only with tokens of the same lease. A
// request with a token and no Fencing-Scope has scope "".
const (
	KeyHeader   = "Idempotency-Key"
	TokenHeader = "Fencing-Token"
	OwnerHeader = "Fencing-Owner"
	ScopeHeader = "Fencing-Scope"
)

// MaxScopeLen is the longest Fencing-Scope accepted, in bytes of the
// unquoted value: leasedriver.MaxNameLen, the longest lease name.
const MaxScopeLen = 256

// MaxKeyLen is the longest idempotency key (and owner) accepted, in bytes of
// the unquoted value. The draft recommends a UUID (36 bytes); the scheduler's
// slot keys ("job:2006-01-02T15:04:05Z:partition") fit easily.
const MaxKeyLen = 255

// ErrInvalidKey matches every error about an Idempotency-Key value that is
// missing, not a valid RFC 8941 sf-string, empty, longer than MaxKeyLen or
// not printable ASCII.
var ErrInvalidKey = errors.New("httpfence: invalid idempotency key")

// ErrInvalidOwner matches every error about a Fencing-Owner value: missing
// while a token is present, or not a valid sf-string of 1 to MaxKeyLen
// printable ASCII characters.
var ErrInvalidOwner = errors.New("httpfence: invalid fencing owner")

// ErrInvalidScope matches every error about a Fencing-Scope value: sent
// without a token, repeated, or neither a valid sf-string of 0 to
// MaxScopeLen printable ASCII characters nor a valid Display String of at
// most MaxScopeLen bytes of UTF-8 (see FormatScope). A holder whose Scope
// is longer or not valid UTF-8 makes Transport.RoundTrip fail with it.
var ErrInvalidScope = errors.New("httpfence: invalid fencing scope")

// FormatKey returns key as an RFC 8941 sf-string (§4.1.6): in double quotes,
// with '\' and '"' escaped by a backslash. key must be 1 to MaxKeyLen bytes
// of printable ASCII (0x20-0x7E); otherwise FormatKey returns an error
// matching ErrInvalidKey, since an sf-string cannot carry anything else.
func FormatKey(key string) (string, error) {
	if err := checkValue(key); err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	return quote(key), nil
}

// ParseKey parses an Idempotency-Key field value: an RFC 8941 Item whose
// bare item is a String (§4.2.5), with optional leading and trailing spaces.
// Parameters are refused (the draft defines none), as are empty keys and
// keys longer than MaxKeyLen. Errors match ErrInvalidKey.
func ParseKey(v string) (string, error) {
	s, err := parseString(v, MaxKeyLen)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	return s, nil
}

// ParseFencing reads the Fencing-Token, Fencing-Owner and Fencing-Scope
// headers of h into a holder. present is false when none is sent. A token
// without Fencing-Scope has scope "". It returns an error matching
// fence.ErrInvalidToken for a token that is not canonical decimal, or is
// repeated; ErrInvalidOwner for an owner that is missing next to a token, is
// not a valid sf-string, or is repeated, or that comes without a token;
// ErrInvalidScope for a scope that is not a valid sf-string, is repeated,
// or comes without a token. A present token of "0" parses to fence.None;
// whether None is accepted is the sink's rule (it never is).
func ParseFencing(h http.Header) (holder fence.Holder, present bool, err error) {
	tokens, owners, scopes := h.Values(TokenHeader), h.Values(OwnerHeader), h.Values(ScopeHeader)
	switch {
	case len(tokens) == 0 && len(owners) == 0 && len(scopes) == 0:
		return fence.Holder{}, false, nil
	case len(tokens) > 1:
		return fence.Holder{}, false, fmt.Errorf("%w: %d %s fields", fence.ErrInvalidToken, len(tokens), TokenHeader)
	case len(tokens) == 0 && len(owners) > 0:
		return fence.Holder{}, false, fmt.Errorf("%w: %s without %s", ErrInvalidOwner, OwnerHeader, TokenHeader)
	case len(tokens) == 0:
		return fence.Holder{}, false, fmt.Errorf("%w: %s without %s", ErrInvalidScope, ScopeHeader, TokenHeader)
	case len(owners) != 1:
		return fence.Holder{}, false, fmt.Errorf("%w: want one %s field, got %d", ErrInvalidOwner, OwnerHeader, len(owners))
	case len(scopes) > 1:
		return fence.Holder{}, false, fmt.Errorf("%w: want at most one %s field, got %d", ErrInvalidScope, ScopeHeader, len(scopes))
	}
	t, err := fence.ParseToken(strings.Trim(tokens[0], " "))
	if err != nil {
		return fence.Holder{}, false, err
	}
	owner, err := parseString(owners[0], MaxKeyLen)
	if err != nil {
		return fence.Holder{}, false, fmt.Errorf("%w: %w", ErrInvalidOwner, err)
	}
	var scope string
	if len(scopes) == 1 {
		if scope, err = parseScope(scopes[0]); err != nil {
			return fence.Holder{}, false, fmt.Errorf("%w: %w", ErrInvalidScope, err)
		}
	}
	return fence.Holder{Scope: scope, Token: t, Owner: owner}, true, nil
}

// FormatScope returns scope as a Fencing-Scope value: an RFC 8941
// sf-string when scope is printable ASCII (0x20-0x7E), and otherwise an
// RFC 9651 Display String (§3.3.8: %"...", every byte of the UTF-8
// encoding outside printable ASCII, and '%' and '"', as %xx in lower-case
// hex), so that every lease name and scheduler partition that is valid
// UTF-8 ("settle|zürich") can travel. scope must be 0 to MaxScopeLen bytes
// of valid UTF-8 without control, format or default-ignorable characters
// (the rule of lease names; a scope holding one can only be forged, and
// ParseFencing refuses it); otherwise FormatScope returns an error
// matching ErrInvalidScope.
func FormatScope(scope string) (string, error) {
	switch {
	case len(scope) > MaxScopeLen:
		return "", fmt.Errorf("%w: %d bytes, limit %d", ErrInvalidScope, len(scope), MaxScopeLen)
	case checkLen(scope, MaxScopeLen) == nil || scope == "":
		return quote(scope), nil
	case !utf8.ValidString(scope):
		return "", fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidScope, scope)
	case !safe.Printable(scope):
		return "", fmt.Errorf("%w: %q holds a control, format or default-ignorable character", ErrInvalidScope, scope)
	}
	const hexDigits = "0123456789abcdef"
	var b strings.Builder
	b.Grow(len(scope) + 3)
	b.WriteString(`%"`)
	for i := 0; i < len(scope); i++ {
		c := scope[i]
		if c < 0x20 || c > 0x7e || c == '%' || c == '"' {
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&0xf])
			continue
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String(), nil
}

// parseScope parses a Fencing-Scope value: an sf-string, possibly empty, or
// a Display String.
func parseScope(v string) (string, error) {
	v = strings.Trim(v, " ")
	switch {
	case v == `""`:
		return "", nil
	case strings.HasPrefix(v, `%"`):
		return parseDisplayString(v)
	}
	return parseString(v, MaxScopeLen)
}

// parseDisplayString is RFC 9651 §4.2.10 (parsing a Display String) for a
// whole field value without parameters: %"...", where '%' starts two
// lower-case hex digits, other bytes are printable ASCII and stand for
// themselves, and the decoded bytes are valid UTF-8 of at most MaxScopeLen
// bytes.
func parseDisplayString(v string) (string, error) {
	var b strings.Builder
	for i := 2; i < len(v); i++ {
		c := v[i]
		switch {
		case c < 0x20 || c > 0x7e:
			return "", fmt.Errorf("byte 0x%02x at offset %d: display strings hold printable ASCII only", c, i)
		case c == '%':
			if i+2 >= len(v) {
				return "", errors.New("display string ends inside a %-escape")
			}
			hi, okHi := lowerHex(v[i+1])
			lo, okLo := lowerHex(v[i+2])
			if !okHi || !okLo {
				return "", fmt.Errorf("display string escape %q at offset %d: want two lower-case hex digits", v[i:i+3], i)
			}
			b.WriteByte(hi<<4 | lo)
			i += 2
		case c == '"':
			if rest := v[i+1:]; rest != "" {
				if rest[0] == ';' {
					return "", errors.New("parameters are not supported")
				}
				return "", fmt.Errorf("%d bytes after the closing quote", len(rest))
			}
			s := b.String()
			if !utf8.ValidString(s) {
				return "", errors.New("display string is not valid UTF-8")
			}
			if !safe.Printable(s) {
				// No lease name holds one (lease.ErrInvalidName): such a
				// scope can only be forged.
				return "", errors.New("display string holds a control, format or default-ignorable character")
			}
			return s, nil
		default:
			b.WriteByte(c)
		}
		if b.Len() > MaxScopeLen {
			return "", fmt.Errorf("longer than %d bytes", MaxScopeLen)
		}
	}
	return "", errors.New("display string has no closing quote")
}

// lowerHex decodes one lower-case hex digit (RFC 9651 allows no others).
func lowerHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// quote writes s, already checked by checkValue, as an sf-string.
func quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	b.WriteByte('"')
	return b.String()
}

// parseString is RFC 8941 §4.2 (parsing a field as an Item) restricted to a
// String bare item without parameters, plus the rules of checkLen: 1 to
// limit bytes of printable ASCII.
func parseString(v string, limit int) (string, error) {
	v = strings.Trim(v, " ")
	if len(v) == 0 || v[0] != '"' {
		return "", errors.New("not an sf-string: want a double-quoted string")
	}
	var b strings.Builder
	i := 1
	for ; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i == len(v) {
				return "", errors.New("sf-string ends inside an escape")
			}
			if v[i] != '"' && v[i] != '\\' {
				return "", fmt.Errorf("sf-string escapes %q; only '\"' and '\\' may be escaped", v[i])
			}
			b.WriteByte(v[i])
		case c == '"':
			if rest := v[i+1:]; rest != "" {
				if rest[0] == ';' {
					return "", errors.New("parameters are not supported")
				}
				return "", fmt.Errorf("%d bytes after the closing quote", len(rest))
			}
			s := b.String()
			if err := checkLen(s, limit); err != nil {
				return "", err
			}
			return s, nil
		case c < 0x20 || c > 0x7e:
			return "", fmt.Errorf("byte 0x%02x at offset %d: sf-strings hold printable ASCII only", c, i)
		default:
			b.WriteByte(c)
		}
		if b.Len() > limit {
			return "", fmt.Errorf("longer than %d bytes", limit)
		}
	}
	return "", errors.New("sf-string has no closing quote")
}

// checkValue reports why s cannot be a key or owner: empty, longer than
// MaxKeyLen, or a byte outside printable ASCII.
func checkValue(s string) error { return checkLen(s, MaxKeyLen) }

// checkLen reports why s cannot be an sf-string value of 1 to limit bytes:
// empty, longer, or a byte outside printable ASCII.
func checkLen(s string, limit int) error {
	switch {
	case s == "":
		return errors.New("empty")
	case len(s) > limit:
		return fmt.Errorf("%d bytes, limit %d", len(s), limit)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return fmt.Errorf("byte 0x%02x at offset %d: sf-strings hold printable ASCII only", s[i], i)
		}
	}
	return nil
}
