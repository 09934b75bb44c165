package httpfence

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// docStatusRows returns the first column of doc.go's status table: "400
// missing-idempotency-key", ..., "(stored status)", "(handler's)".
func docStatusRows(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	doc := string(b)
	start := strings.Index(doc, "// # Status table")
	end := strings.Index(doc, "// The middleware's state table")
	require.True(t, start >= 0 && end > start, "status table not found in doc.go")
	row := regexp.MustCompile(`^//\t(\d{3} [a-z-]+|\(stored status\)|\(handler's\))`)
	var rows []string
	for _, line := range strings.Split(doc[start:end], "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			rows = append(rows, m[1])
		}
	}
	return rows
}

// tableRows returns what the state table answers before and instead of the
// handler, in the table's order, each once: "status problem" for a problem,
// "(stored status)" for a replay, "(handler's)" for running the handler.
func tableRows() []string {
	var rows []string
	seen := map[string]bool{}
	for _, tr := range transitions {
		var r string
		switch {
		case tr.state == stateRunning:
			continue // after the handler: described below the table
		case tr.action == actReplay:
			r = "(stored status)"
		case tr.action == actRun:
			r = "(handler's)"
		case tr.problem != "":
			r = strings.Join([]string{itoa(tr.status), tr.problem}, " ")
		default:
			continue
		}
		if !seen[r] {
			seen[r] = true
			rows = append(rows, r)
		}
	}
	return rows
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestStatusTableMatchesDoc(t *testing.T) {
	assert.Equal(t, tableRows(), docStatusRows(t))
}

// The documentation's paragraph after the table names the one problem the
// table answers after the handler.
func TestStatusTableAfterHandlerMatchesDoc(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	for _, tr := range transitions {
		if tr.state == stateRunning && tr.problem != "" {
			assert.Contains(t, string(b), itoa(tr.status)+" "+tr.problem)
		}
	}
}

// Every (state, event) pair appears once, every problem row has a status
// and title, and every non-problem row has neither.
func TestStateTableWellFormed(t *testing.T) {
	seen := map[stateEvent]bool{}
	for _, tr := range transitions {
		k := stateEvent{tr.state, tr.event}
		assert.False(t, seen[k], "duplicate row %v", k)
		seen[k] = true
		answers := tr.action == actRefuse || tr.action == actRelease || tr.action == actRetry
		if answers || tr.problem != "" {
			assert.NotEmpty(t, tr.problem, "row %v", k)
			assert.NotEmpty(t, tr.title, "row %v", k)
			assert.GreaterOrEqual(t, tr.status, 400, "row %v", k)
		} else {
			assert.Zero(t, tr.status, "row %v", k)
			assert.Empty(t, tr.title, "row %v", k)
		}
	}
	// Each state Begin reports has its evBegin row.
	for _, s := range []idemstore.State{idemstore.StateNew, idemstore.StateInFlight, idemstore.StateMismatch, idemstore.StateCompleted, stateOther} {
		assert.True(t, seen[stateEvent{s, evBegin}], "no evBegin row for %v", s)
	}
}
