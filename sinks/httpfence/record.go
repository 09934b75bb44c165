package httpfence

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"

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

// recorder passes a response through to the client and keeps a copy of
// the response the handler wrote: the status and the header fields it set
// at the first final WriteHeader, and every body byte it wrote, up to limit
// bytes, whether or not the client took them (a client that went away
// makes the writes fail; its retry must get the whole response, see
// complete).
type recorder struct {
	w        http.ResponseWriter
	before   http.Header // the header fields set before the handler ran (outer middleware's)
	status   int
	header   http.Header
	body     bytes.Buffer
	written  int64 // body bytes the handler wrote
	limit    int64
	overflow bool
	failed   bool // a write to the client failed
	hijacked bool // the handler took the connection over
}

func newRecorder(w http.ResponseWriter, limit int64) *recorder {
	return &recorder{w: w, before: w.Header().Clone(), limit: limit}
}

func (r *recorder) Header() http.Header { return r.w.Header() }

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		r.status, r.header = code, r.handlerHeader()
	}
	r.w.WriteHeader(code)
}

// handlerHeader returns the header fields the handler set or changed: a
// field set by a middleware around this one, for this request alone (a
// request id, a session cookie), is not the handler's response, and a
// replay to another request must not repeat it.
func (r *recorder) handlerHeader() http.Header {
	h := r.w.Header().Clone()
	for k, v := range r.before {
		if slices.Equal(h[k], v) {
			delete(h, k)
		}
	}
	return h
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	n, err := r.w.Write(p)
	if err != nil {
		r.failed = true
	}
	r.written += int64(len(p))
	if !r.overflow {
		if r.limit >= 0 && int64(r.body.Len()+len(p)) > r.limit {
			r.overflow = true
			r.body = bytes.Buffer{}
		} else {
			r.body.Write(p)
		}
	}
	return n, err
}

// complete reports whether the body recorded is the whole response: every
// write reached the client, or the handler declared its length
// (Content-Length) and wrote that many bytes. After a failed write a
// handler may have stopped (io.Copy does), and nothing else tells a
// whole body from a cut one.
func (r *recorder) complete() bool {
	if !r.failed {
		return true
	}
	cl := r.header.Get("Content-Length")
	if cl == "" {
		return false
	}
	n, err := strconv.ParseInt(cl, 10, 64)
	return err == nil && n == r.written
}

// Flush implements http.Flusher when the underlying writer does.
func (r *recorder) Flush() {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if err := http.NewResponseController(r.w).Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		r.failed = true
	}
}

// Hijack implements http.Hijacker when the underlying writer does, and
// notes that the connection is the handler's: nothing of it is stored.
func (r *recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(r.w).Hijack()
	if err == nil {
		r.hijacked = true
	}
	return c, rw, err
}

// Unwrap gives http.ResponseController the underlying writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.w }
