package httpfence

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"net/http"
	"slices"

	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore"
)

// replay writes a stored response: its header fields replace any of the
// same name already set, then its status and body bytes.
func replay(w http.ResponseWriter, resp *idemstore.Response) {
	h := w.Header()
	for k, v := range resp.Header {
		h[k] = slices.Clone(v)
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// fingerprint identifies a request for key reuse detection: SHA-256 over the
// method, escaped path, raw query and body, each length-prefixed. Headers,
// the key and the fencing token are left out, so a retry by a newer lease
// holder (same key, larger token) is the same request.
func fingerprint(r *http.Request, body []byte) string {
	h := sha256.New()
	var n [binary.MaxVarintLen64]byte
	for _, part := range [][]byte{[]byte(r.Method), []byte(r.URL.EscapedPath()), []byte(r.URL.RawQuery), body} {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(part)))])
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// recorder passes a response through to the client and keeps a copy: the
// status and header fields at the first final WriteHeader, and the body up
// to limit bytes.
type recorder struct {
	w        http.ResponseWriter
	status   int
	header   http.Header
	body     bytes.Buffer
	limit    int64
	overflow bool
}

func (r *recorder) Header() http.Header { return r.w.Header() }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		r.status, r.header = code, r.w.Header().Clone()
	}
	r.w.WriteHeader(code)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	n, err := r.w.Write(p)
	if !r.overflow {
		if r.limit >= 0 && int64(r.body.Len()+n) > r.limit {
			r.overflow = true
			r.body = bytes.Buffer{}
		} else {
			r.body.Write(p[:n])
		}
	}
	return n, err
}

// Flush implements http.Flusher when the underlying writer does.
func (r *recorder) Flush() {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	_ = http.NewResponseController(r.w).Flush()
}

// Unwrap gives http.ResponseController the underlying writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }
