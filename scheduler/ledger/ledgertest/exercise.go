package ledgertest

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// TokenBase is where the suite's fencing tokens start: realistic values, of
// the size the lease's max(INCR, TIME in µs) mechanism issues, below 2^53.
const TokenBase fence.Token = 1_700_000_000_000_000

// Exercise runs the ledger contract as parallel subtests of t, one per
// check (see the package documentation for the list). newLedger is called
// once per check, with the check's t, and returns the ledger to check: a
// fresh one (a schema or a key prefix of its own, released with
// t.Cleanup) or one shared by every check, as replicas share one in
// production (each check works on a job name of its own). A check of an
// optional interface the ledger does not implement is skipped with a
// message naming it; a newLedger that skips (no server available) skips
// the check.
//
// The suite passes explicit now values and compares the times a ledger
// returns at millisecond precision, so a store may truncate to the
// millisecond. Slot instants are whole minutes, an hour ahead of the wall
// clock, so a horizon started by a State at the wall clock's now precedes
// them.
func Exercise(t *testing.T, newLedger func(t *testing.T) ledger.Ledger) {
	t.Helper()
	require.NotNil(t, newLedger, "ledgertest: Exercise: newLedger is nil")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newFixture(t, c.name, newLedger))
		})
	}
}

// testCase is one subtest of Exercise.
type testCase struct {
	name string
	run  func(t *testing.T, x *fixture)
}

// cases lists the subtests, grouped by the file that defines them.
var cases = concat(beginCases, fenceCases, perSlotCases, scopeCases, stateCases, operatorCases, readCases, optionalCases, pruneCases, misuseCases)

func concat(groups ...[]testCase) []testCase {
	var all []testCase
	for _, g := range groups {
		all = append(all, g...)
	}
	return all
}

// implements returns the ledger under test as the optional interface T,
// or skips t with a message naming T when the ledger does not implement
// it.
func implements[T any](t *testing.T, x *fixture) T {
	t.Helper()
	v, ok := x.raw.(T)
	if !ok {
		t.Skipf("ledgertest: skipped: the ledger does not implement %v", reflect.TypeFor[T]())
	}
	return v
}

// fixture is one subtest's setup: a ledger, a job name nobody else uses,
// and the instant of its first slot.
type fixture struct {
	t *testing.T
	// ledger is the ledger under test as the cases call it (placeholder
	// scopes filled in: see scoped); raw is the ledger itself, for its
	// optional interfaces.
	ledger ledger.Ledger
	raw    ledger.Ledger
	job    string
	base   time.Time
}

func newFixture(t *testing.T, name string, newLedger func(t *testing.T) ledger.Ledger) *fixture {
	t.Helper()
	l := newLedger(t)
	require.NotNil(t, l, "ledgertest: newLedger returned nil")
	return &fixture{
		t:      t,
		ledger: scoped{l},
		raw:    l,
		job:    uniqueName(t, "ledgertest-"+name),
		base:   time.Now().UTC().Truncate(time.Minute).Add(time.Hour),
	}
}

// uniqueName returns prefix with a random suffix: a job name unique even
// against a store shared by runs (-count=N).
func uniqueName(t *testing.T, prefix string) string {
	t.Helper()
	var b [4]byte
	_, err := rand.Read(b[:])
	require.NoError(t, err)
	return prefix + "-" + hex.EncodeToString(b[:])
}

// at is the instant of slot i: base + i minutes.
func (x *fixture) at(i int) time.Time { return x.base.Add(time.Duration(i) * time.Minute) }

// slot is slot i of the job in the default partition "".
func (x *fixture) slot(i int) ledger.Slot { return x.slotIn("", i) }

// slotIn is slot i of the job in partition p.
func (x *fixture) slotIn(p string, i int) ledger.Slot {
	return ledger.Slot{Job: x.job, At: x.at(i), Partition: p}
}

// now is a now value d after slot i, with a millisecond part, so a store
// that drops milliseconds is caught.
func (x *fixture) now(i int, d time.Duration) time.Time {
	return x.at(i).Add(d + 250*time.Millisecond)
}

// holder returns the fence of holder n of the unit lease of the slot it
// writes: token TokenBase+n, owner "owner-n". A larger n is a later holder.
func holder(n int) ledger.Fence {
	return ledger.Fence{Scope: unitMark, Token: TokenBase + fence.Token(n), Owner: fmt.Sprintf("owner-%d", n)}
}

func (x *fixture) begin(s ledger.Slot, f ledger.Fence, maxAttempts int, now time.Time) int {
	x.t.Helper()
	n, _ := x.beginLeft(s, f, maxAttempts, now)
	return n
}

// beginLeft is begin that also returns the attempts the budget has left.
func (x *fixture) beginLeft(s ledger.Slot, f ledger.Fence, maxAttempts int, now time.Time) (attempt, left int) {
	x.t.Helper()
	n, left, err := x.ledger.Begin(x.t.Context(), s, f, maxAttempts, now)
	require.NoError(x.t, err, "Begin %s by token %d", s.Key(), f.Token)
	return n, left
}

func (x *fixture) requireDone(s ledger.Slot, f ledger.Fence, maxAttempts int, now time.Time) {
	x.t.Helper()
	n, _, err := x.ledger.Begin(x.t.Context(), s, f, maxAttempts, now)
	require.ErrorIs(x.t, err, ledger.ErrSlotDone, "Begin %s returned attempt %d", s.Key(), n)
}

func (x *fixture) finish(s ledger.Slot, f ledger.Fence, attempt int, o ledger.Outcome, now time.Time) {
	x.t.Helper()
	require.NoError(x.t, x.ledger.Finish(x.t.Context(), s, f, attempt, o, now), "Finish %s attempt %d", s.Key(), attempt)
}

// fail finishes attempt as a retryable failure, retry a minute later.
func (x *fixture) fail(s ledger.Slot, f ledger.Fence, attempt int, now time.Time) {
	x.t.Helper()
	x.finish(s, f, attempt, ledger.Outcome{
		Status: ledger.StatusFailed, Class: ledger.ClassRetryable, Error: "try again", RetryAt: now.Add(time.Minute),
	}, now)
}

func (x *fixture) succeed(s ledger.Slot, f ledger.Fence, attempt int, now time.Time) {
	x.t.Helper()
	x.finish(s, f, attempt, ledger.Outcome{Status: ledger.StatusSucceeded}, now)
}

func (x *fixture) get(s ledger.Slot) ledger.Record {
	x.t.Helper()
	rec, found, err := x.ledger.Get(x.t.Context(), s)
	require.NoError(x.t, err)
	require.True(x.t, found, "Get %s: no record", s.Key())
	requireSlot(x.t, s, rec.Slot)
	return rec
}

func (x *fixture) requireAbsent(s ledger.Slot) {
	x.t.Helper()
	rec, found, err := x.ledger.Get(x.t.Context(), s)
	require.NoError(x.t, err)
	require.False(x.t, found, "Get %s: want no record, got %+v", s.Key(), rec)
}

func (x *fixture) state(partition string, since time.Time) ledger.State {
	x.t.Helper()
	st, err := x.ledger.State(x.t.Context(), x.job, partition, since, time.Now())
	require.NoError(x.t, err)
	return st
}

// openAt returns the instants of st.Open, in its order, as labels.
func (x *fixture) openAt(st ledger.State) []string {
	at := make([]string, 0, len(st.Open))
	for _, o := range st.Open {
		at = append(at, x.label(o.At))
	}
	return at
}

// label names an instant for failure messages: "slot 3" for slot 3, the
// RFC 3339 form otherwise.
func (x *fixture) label(t time.Time) string {
	d := t.Sub(x.base)
	if d%time.Minute == 0 {
		return fmt.Sprintf("slot %d", d/time.Minute)
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// requireOpen checks the instants State lists as open, in order.
func (x *fixture) requireOpen(st ledger.State, want ...time.Time) {
	x.t.Helper()
	labels := make([]string, 0, len(want))
	for _, w := range want {
		labels = append(labels, x.label(w))
	}
	require.Equal(x.t, labels, x.openAt(st), "State.Open")
}

// requireStale checks that err is a refusal by the acceptance rule: it
// matches fence.ErrStaleToken, holds a *fence.StaleTokenError presenting
// presented, and reports current as the current token (when not None).
func requireStale(t *testing.T, err error, presented, current fence.Token, what string) {
	t.Helper()
	require.Error(t, err, "%s: want a stale-token refusal", what)
	require.ErrorIs(t, err, fence.ErrStaleToken, "%s", what)
	var stale *fence.StaleTokenError
	require.True(t, errors.As(err, &stale), "%s: %v holds no *fence.StaleTokenError", what, err)
	require.Equal(t, presented, stale.Presented, "%s: StaleTokenError.Presented", what)
	if current != fence.None {
		require.Equal(t, current, stale.Current, "%s: StaleTokenError.Current", what)
	}
}

// ms returns t at millisecond precision in UTC; the zero time stays zero.
func ms(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}

// requireTime checks got against want at millisecond precision; a zero want
// requires a zero got.
func requireTime(t *testing.T, want, got time.Time, what string) {
	t.Helper()
	require.Equal(t, ms(want), ms(got), "%s", what)
}

func requireSlot(t *testing.T, want, got ledger.Slot) {
	t.Helper()
	require.Equal(t, want.Job, got.Job, "Slot.Job")
	require.Equal(t, want.Partition, got.Partition, "Slot.Partition")
	requireTime(t, want.At, got.At, "Slot.At")
}

// normalized returns rec with every time at millisecond precision, for
// comparing whole records.
func normalized(rec ledger.Record) ledger.Record {
	rec.Slot.At = ms(rec.Slot.At)
	rec.RetryAt = ms(rec.RetryAt)
	atts := make([]ledger.Attempt, len(rec.Attempts))
	for i, a := range rec.Attempts {
		a.Started, a.Heartbeat, a.Finished = ms(a.Started), ms(a.Heartbeat), ms(a.Finished)
		atts[i] = a
	}
	rec.Attempts = atts
	return rec
}

func requireSameRecord(t *testing.T, want, got ledger.Record, what string) {
	t.Helper()
	require.Equal(t, normalized(want), normalized(got), "%s", what)
}
