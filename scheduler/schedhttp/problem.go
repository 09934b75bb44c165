package schedhttp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// ProblemBase is the prefix of every problem type the admin API answers
// with: a Problem's Type is ProblemBase + one of the names below, so a
// client tells problems apart by Type, not by their text.
//
//	400 invalid-request    a field or parameter is wrong (Problem.Field names it) or the body is not JSON
//	400 invalid-job        scheduler.ErrInvalidJob (a malformed job name)
//	400 invalid-argument   scheduler.ErrInvalidArgument (not a slot, a range that is not one)
//	400 trigger-taken      scheduler.ErrTriggerTaken (the second is a slot or has a run)
//	400 partition-required a job with partitions, a request without one (Field "partition")
//	401 unauthenticated    the Authorizer's error matches ErrUnauthenticated
//	403 forbidden          refused by the Authorizer, or no Authorizer configured
//	403 cross-origin       an action from another origin
//	404 unknown-job        scheduler.ErrUnknownJob (job or partition)
//	404 not-found          no record of that slot
//	404 no-lease-inspector Options.Leases is nil
//	409 slot-running       ledger.ErrSlotRunning
//	413 body-too-large     a body over Options.MaxBodyBytes, whatever its Content-Type
//	415 unsupported-media-type  an action without Content-Type: application/json
//	500 internal-error     see the server log
const ProblemBase = "https://holdfast.dev/problems/admin/"

// maxEcho bounds what a problem's detail repeats of the request (a job
// name, a time, a glob): longer input is cut and marked "...".
const maxEcho = 64

// maxDetail bounds a problem's detail (bytes).
const maxDetail = 512

// problemError is an error with the problem type it answers with and the
// request field it is about ("" for none).
type problemError struct {
	kind  string // a name under ProblemBase
	field string
	err   error
}

func (e *problemError) Error() string { return e.err.Error() }
func (e *problemError) Unwrap() error { return e.err }

// badField is a 400 invalid-request about the request's field (a body
// member or a query parameter).
func badField(field, format string, args ...any) error {
	return &problemError{kind: "invalid-request", field: field,
		err: fmt.Errorf("%w: %s: %s", errBadRequest, field, fmt.Sprintf(format, args...))}
}

// clip cuts input from the request to maxEcho bytes (on a rune
// boundary), marked "...", for a problem's detail or field.
func clip(s string) string {
	if len(s) <= maxEcho {
		return s
	}
	cut := maxEcho
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// clipQuoted clips every Go-quoted string of detail (a backend's error
// text, which quotes the job names, partitions and times it repeats with
// %q) whose value is over maxEcho bytes, as echo does: so a detail
// repeats at most maxEcho bytes of any input, wherever its text was made.
func clipQuoted(detail string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(detail); i++ {
		if detail[i] != '"' {
			continue
		}
		q, err := strconv.QuotedPrefix(detail[i:])
		if err != nil {
			continue
		}
		if v, err := strconv.Unquote(q); err == nil && len(v) > maxEcho {
			b.WriteString(detail[last:i])
			b.WriteString(echo(v))
			last = i + len(q)
		}
		i += len(q) - 1
	}
	if last == 0 {
		return detail
	}
	b.WriteString(detail[last:])
	return b.String()
}

// echo quotes input from the request for a problem's detail, clipped.
func echo(s string) string { return fmt.Sprintf("%q", clip(s)) }

// problemOf returns the status, problem type name and field of err.
func problemOf(err error) (status int, kind, field string) {
	var pe *problemError
	if errors.As(err, &pe) {
		field = pe.field
	}
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return http.StatusRequestEntityTooLarge, "body-too-large", ""
	case pe != nil && pe.kind != "":
		return statusOfKind(pe.kind), pe.kind, field
	case errors.Is(err, scheduler.ErrTriggerTaken):
		return http.StatusBadRequest, "trigger-taken", field
	case errors.Is(err, scheduler.ErrInvalidJob):
		return http.StatusBadRequest, "invalid-job", field
	case errors.Is(err, scheduler.ErrInvalidArgument):
		return http.StatusBadRequest, "invalid-argument", field
	case errors.Is(err, errBadRequest), errors.Is(err, lease.ErrInvalidName), errors.Is(err, lease.ErrInvalidOptions):
		return http.StatusBadRequest, "invalid-request", field
	case errors.Is(err, scheduler.ErrUnknownJob):
		return http.StatusNotFound, "unknown-job", field
	case errors.Is(err, errNotFound):
		return http.StatusNotFound, "not-found", field
	case errors.Is(err, ledger.ErrSlotRunning):
		return http.StatusConflict, "slot-running", field
	}
	return http.StatusInternalServerError, "internal-error", ""
}

// statusOfKind is the status of the problem types a problemError names.
func statusOfKind(kind string) int {
	switch kind {
	case "no-lease-inspector", "not-found", "unknown-job":
		return http.StatusNotFound
	}
	return http.StatusBadRequest
}

// writeProblem answers with the problem kind (a name under ProblemBase),
// about field ("" for none); detail is cut to maxDetail bytes.
func writeProblem(w http.ResponseWriter, status int, kind, field, detail string) {
	if len(detail) > maxDetail {
		cut := maxDetail
		for cut > 0 && !utf8.RuneStart(detail[cut]) {
			cut--
		}
		detail = detail[:cut] + "..."
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(Problem{Type: ProblemBase + kind, Title: http.StatusText(status), Status: status,
		Detail: detail, Field: field})
}

// readBody reads a POST body: nil for an empty or blank one; an
// oversized body's *http.MaxBytesError as it is (413); another read error
// as a bad request.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, err
	case err != nil:
		return nil, fmt.Errorf("%w: body: %w", errBadRequest, err)
	case len(bytes.TrimSpace(b)) == 0:
		return nil, nil
	}
	return b, nil
}

// decode reads a JSON object body into v, a pointer to a request struct
// (an empty body leaves v as it is). A member v does not have, or one
// whose value does not decode, is a 400 that names it (Problem.Field);
// an oversized body is a 413.
func decode(r *http.Request, v any) error {
	_, err := decodeMembers(r, v)
	return err
}

// decodeMembers is decode that also returns the names of the members the
// body holds (none for an empty body): a member present with the zero
// value (a time of year 1) is told apart from one absent. A body that is
// not a JSON object (null, an array, trailing data) is a 400.
func decodeMembers(r *http.Request, v any) (map[string]bool, error) {
	b, err := readBody(r)
	if err != nil || b == nil {
		return nil, err
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(b, &members); err != nil {
		return nil, fmt.Errorf("%w: body: want a JSON object: %w", errBadRequest, err)
	}
	if members == nil { // null
		return nil, fmt.Errorf("%w: body: want a JSON object, not null", errBadRequest)
	}
	if name, twice := duplicateMember(b); twice {
		return nil, badField(clip(name), "given twice")
	}
	rv := reflect.ValueOf(v).Elem()
	fields := map[string]int{}
	for i := range rv.NumField() {
		name, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("json"), ",")
		fields[name] = i
	}
	present := make(map[string]bool, len(members))
	for _, name := range slices.Sorted(maps.Keys(members)) {
		i, ok := fields[name]
		if !ok {
			return nil, badField(clip(name), "unknown field")
		}
		if err := json.Unmarshal(members[name], rv.Field(i).Addr().Interface()); err != nil {
			return nil, badField(name, "%v", err)
		}
		present[name] = true
	}
	return present, nil
}

// duplicateMember returns a member name that the JSON object b holds
// twice, and true; encoding/json keeps the last one's value, where a
// reader of the body sees the first (names "SHOULD be unique", RFC 8259
// §4; I-JSON, RFC 7493 §2.3, requires it). b is an object already read
// whole by encoding/json.
func duplicateMember(b []byte) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", false
	}
	seen := map[string]bool{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", false
		}
		name, _ := t.(string)
		if seen[name] {
			return name, true
		}
		seen[name] = true
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return "", false
		}
	}
	return "", false
}
