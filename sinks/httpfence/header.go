package httpfence

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/holdfast-go/holdfast/fence"
)

// Header names. The Idempotency-Key header follows
// draft-ietf-httpapi-idempotency-key-header; Fencing-Token is
// fence.HeaderName; Fencing-Owner carries the owner that presents the token
// so that the server can apply the equal-token-same-owner half of the
// acceptance rule.
const (
	KeyHeader   = "Idempotency-Key"
	TokenHeader = fence.HeaderName
	OwnerHeader = "Fencing-Owner"
)

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
	s, err := parseString(v)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	return s, nil
}

// ParseFencing reads the Fencing-Token and Fencing-Owner headers of h.
// present is false when neither is sent. It returns an error matching
// fence.ErrInvalidToken for a token that is not canonical decimal, or is
// repeated; ErrInvalidOwner for an owner that is missing next to a token, is
// not a valid sf-string, or is repeated, or that comes without a token.
// A present token of "0" parses to fence.None; whether None is accepted is
// the sink's rule (it never is).
func ParseFencing(h http.Header) (t fence.Token, owner string, present bool, err error) {
	tokens, owners := h.Values(TokenHeader), h.Values(OwnerHeader)
	switch {
	case len(tokens) == 0 && len(owners) == 0:
		return fence.None, "", false, nil
	case len(tokens) > 1:
		return fence.None, "", false, fmt.Errorf("%w: %d %s fields", fence.ErrInvalidToken, len(tokens), TokenHeader)
	case len(tokens) == 0:
		return fence.None, "", false, fmt.Errorf("%w: %s without %s", ErrInvalidOwner, OwnerHeader, TokenHeader)
	case len(owners) != 1:
		return fence.None, "", false, fmt.Errorf("%w: want one %s field, got %d", ErrInvalidOwner, OwnerHeader, len(owners))
	}
	t, err = fence.ParseToken(strings.Trim(tokens[0], " "))
	if err != nil {
		return fence.None, "", false, err
	}
	owner, err = parseString(owners[0])
	if err != nil {
		return fence.None, "", false, fmt.Errorf("%w: %w", ErrInvalidOwner, err)
	}
	return t, owner, true, nil
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
// String bare item without parameters, plus the length rules of checkValue.
func parseString(v string) (string, error) {
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
			if err := checkValue(s); err != nil {
				return "", err
			}
			return s, nil
		case c < 0x20 || c > 0x7e:
			return "", fmt.Errorf("byte 0x%02x at offset %d: sf-strings hold printable ASCII only", c, i)
		default:
			b.WriteByte(c)
		}
		if b.Len() > MaxKeyLen {
			return "", fmt.Errorf("longer than %d bytes", MaxKeyLen)
		}
	}
	return "", errors.New("sf-string has no closing quote")
}

// checkValue reports why s cannot be a key or owner: empty, longer than
// MaxKeyLen, or a byte outside printable ASCII.
func checkValue(s string) error {
	switch {
	case s == "":
		return errors.New("empty")
	case len(s) > MaxKeyLen:
		return fmt.Errorf("%d bytes, limit %d", len(s), MaxKeyLen)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return fmt.Errorf("byte 0x%02x at offset %d: sf-strings hold printable ASCII only", s[i], i)
		}
	}
	return nil
}
