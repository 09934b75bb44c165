package storeutil

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// NewLock returns a random 128-bit lock identifier in hex.
func NewLock() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("httpfence: random lock id: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// EncodeHeader and DecodeHeader are the header codec every store uses:
// JSON of the field map, which keeps the order of values within a field.
func EncodeHeader(h http.Header) ([]byte, error) {
	if h == nil {
		h = http.Header{}
	}
	b, err := json.Marshal(h)
	if err != nil {
		return nil, fmt.Errorf("httpfence: encode header: %w", err)
	}
	return b, nil
}

// DecodeHeader decodes what EncodeHeader encoded; empty input is an empty
// header.
func DecodeHeader(b []byte) (http.Header, error) {
	h := http.Header{}
	if len(b) == 0 {
		return h, nil
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("httpfence: decode stored header: %w", err)
	}
	return h, nil
}

// ValidTTL reports an error for a TTL the stores cannot express (below
// 1 ms).
func ValidTTL(name string, d time.Duration) error {
	if d < time.Millisecond {
		return fmt.Errorf("httpfence: %s %v: want at least 1ms", name, d)
	}
	return nil
}
