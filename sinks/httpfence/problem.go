package httpfence

import (
	"bytes"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/problem"
)

// writeProblem sends p with the problem media type.
func writeProblem(w http.ResponseWriter, p problem.Details) {
	b := problemBody(p)
	w.Header().Set("Content-Type", problem.ContentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(p.Status)
	_, _ = w.Write(b)
}

// problemBody encodes p; a struct of strings and integers always encodes.
func problemBody(p problem.Details) []byte {
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
	p, ok := peekProblem(resp, http.StatusPreconditionFailed, problem.StaleToken)
	if !ok {
		return nil, false
	}
	stale := &fence.StaleTokenError{Resource: p.Resource, Scope: p.Scope, Presented: p.PresentedToken, Current: p.CurrentToken}
	if t, err := time.Parse(time.RFC3339, p.ClosedBefore); err == nil && p.ClosedBefore != "" {
		stale.ClosedBefore = t.UTC() // matches fence.ErrScopeClosed
	}
	return stale, true
}

// readInFlight reports whether resp is the middleware's in-flight answer: a
// 409 with a problem body whose type ends in "/request-in-flight", whatever
// the base. It reads the body as readStale does.
func readInFlight(resp *http.Response) bool {
	_, ok := peekProblem(resp, http.StatusConflict, problem.InFlight)
	return ok
}

// peekProblem returns resp's problem when resp has status and a problem
// body whose type ends in "/" + typ. It reads at most maxProblemBytes of the
// body and puts them back, so the caller can still read the whole body.
func peekProblem(resp *http.Response, status int, typ string) (problem.Details, bool) {
	if resp.StatusCode != status {
		return problem.Details{}, false
	}
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil || mt != problem.ContentType {
		return problem.Details{}, false
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, maxProblemBytes))
	resp.Body = readCloser{io.MultiReader(bytes.NewReader(head), errReader{err}, resp.Body), resp.Body}
	var p problem.Details
	if err != nil || json.Unmarshal(head, &p) != nil || !strings.HasSuffix(p.Type, "/"+typ) {
		return problem.Details{}, false
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
