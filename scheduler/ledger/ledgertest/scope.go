package ledgertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// The suite's holders are built before the slot they write is known
// (holder(n), perSlot(n)), so they carry a placeholder scope that the
// fixture's ledger replaces, per call, with the written slot's real one:
// unitMark becomes ledger.UnitScope of the slot's (job, partition),
// slotMark ledger.SlotScope of the slot. A Fence with any other Scope is
// passed through unchanged, so the cases on scopes themselves (scope.go's
// scopeCases) present exactly what they name. The marks hold a NUL byte:
// no job name or partition does.
const (
	unitMark = "\x00unit"
	slotMark = "\x00slot"
)

// scoped is the ledger under test with the placeholder scopes filled in.
type scoped struct{ ledger.Ledger }

// fill returns f with its placeholder scopes, and its Planner's, made s's.
func fill(s ledger.Slot, f ledger.Fence) ledger.Fence {
	switch f.Scope {
	case unitMark:
		f.Scope = ledger.UnitScope(s.Job, s.Partition)
	case slotMark:
		f.Scope = ledger.SlotScope(s)
	}
	if f.Planner != nil {
		p := fill(s, *f.Planner)
		f.Planner = &p
	}
	return f
}

func (l scoped) Begin(ctx context.Context, s ledger.Slot, f ledger.Fence, maxAttempts int, now time.Time) (int, int, error) {
	return l.Ledger.Begin(ctx, s, fill(s, f), maxAttempts, now)
}

func (l scoped) Heartbeat(ctx context.Context, s ledger.Slot, f ledger.Fence, attempt int, now time.Time) error {
	return l.Ledger.Heartbeat(ctx, s, fill(s, f), attempt, now)
}

func (l scoped) Finish(ctx context.Context, s ledger.Slot, f ledger.Fence, attempt int, o ledger.Outcome, now time.Time) error {
	return l.Ledger.Finish(ctx, s, fill(s, f), attempt, o, now)
}

func (l scoped) Skip(ctx context.Context, s ledger.Slot, f ledger.Fence, status ledger.Status, reason string, now time.Time) error {
	return l.Ledger.Skip(ctx, s, fill(s, f), status, reason, now)
}

// scopeCases cover the scopes of fences themselves (ledger.Fence): a
// ledger checks the fence its Scope names and refuses any other scope.
var scopeCases = []testCase{
	{"UnknownScopeIsRefusedAndChangesNothing", testUnknownScope},
	{"StaleTokenErrorNamesTheScope", testStaleNamesScope},
	{"PlannerOnlyBesideTheSlotScope", testPlannerScope},
}

// A holder presenting a scope that is neither the slot's unit lease nor
// its slot lease (another lease's name, another partition's unit lease,
// another slot's lease) writes nothing, with ErrUnknownScope, whatever its
// token: the ledger has no fence of that scope to compare it with.
func testUnknownScope(t *testing.T, x *fixture) {
	ctx := t.Context()
	s1, s2 := x.slot(1), x.slot(2)
	cur := holder(5)
	n := x.begin(s1, cur, 3, x.now(1, time.Second))
	before := x.get(s1)
	for what, scope := range map[string]string{
		"another lease":          "some-other-lease",
		"another partition":      ledger.UnitScope(x.job, "eu"),
		"another slot's lease":   ledger.SlotScope(x.slot(3)),
		"the empty scope":        "",
		"the job name plus a |":  x.job + "|",
		"a slot lease of a unit": ledger.UnitScope(x.job, "") + "@",
	} {
		f := ledger.Fence{Scope: scope, Token: cur.Token + 100, Owner: "newer"}
		_, _, err := x.ledger.Begin(ctx, s1, f, 3, x.now(1, 2*time.Second))
		require.ErrorIs(t, err, ledger.ErrUnknownScope, "%s: Begin of the running slot", what)
		_, _, err = x.ledger.Begin(ctx, s2, f, 3, x.now(1, 2*time.Second))
		require.ErrorIs(t, err, ledger.ErrUnknownScope, "%s: Begin of a new slot", what)
		require.ErrorIs(t, x.ledger.Heartbeat(ctx, s1, f, n, x.now(1, 3*time.Second)), ledger.ErrUnknownScope, what)
		require.ErrorIs(t, x.ledger.Finish(ctx, s1, f, n, ledger.Outcome{Status: ledger.StatusSucceeded}, x.now(1, 4*time.Second)),
			ledger.ErrUnknownScope, what)
		require.ErrorIs(t, x.ledger.Skip(ctx, s2, f, ledger.StatusSkipped, "x", x.now(1, 5*time.Second)), ledger.ErrUnknownScope, what)
		x.requireAbsent(s2)
		requireSameRecord(t, before, x.get(s1), what)
	}
	// The holder of the unit lease still writes: no fence was raised.
	require.NoError(t, x.ledger.Heartbeat(ctx, s1, cur, n, x.now(1, 6*time.Second)))
	x.succeed(s1, cur, n, x.now(1, 7*time.Second))
}

// A refusal names the refusing fence's scope (fence.StaleTokenError.Scope):
// the unit lease's for a unit-scoped holder, the slot lease's for a
// slot-scoped one, the planner's unit lease for a stale Planner.
func testStaleNamesScope(t *testing.T, x *fixture) {
	ctx := t.Context()
	s1, s2 := x.slot(1), x.slot(2)
	x.begin(s1, holder(5), 3, x.now(1, time.Second))
	_, _, err := x.ledger.Begin(ctx, s1, holder(4), 3, x.now(1, 2*time.Second))
	var stale *fence.StaleTokenError
	require.ErrorAs(t, err, &stale)
	require.Equal(t, ledger.UnitScope(x.job, ""), stale.Scope)

	x.begin(s2, perSlot(7), 3, x.now(1, 3*time.Second))
	_, _, err = x.ledger.Begin(ctx, s2, perSlot(6), 3, x.now(1, 4*time.Second))
	require.ErrorAs(t, err, &stale)
	require.Equal(t, ledger.SlotScope(s2), stale.Scope)

	s3 := x.slot(3)
	old := perSlot(8)
	p := holder(4)
	old.Planner = &p
	_, _, err = x.ledger.Begin(ctx, s3, old, 3, x.now(1, 5*time.Second))
	require.ErrorAs(t, err, &stale)
	require.Equal(t, ledger.UnitScope(x.job, ""), stale.Scope, "the stale planner's")
	x.requireAbsent(s3)
}

// Only a slot-scoped Fence carries a Planner, and the Planner has the unit
// scope: anything else is refused and writes nothing.
func testPlannerScope(t *testing.T, x *fixture) {
	ctx := t.Context()
	s := x.slot(1)
	p := holder(5)
	unitWithPlanner := holder(6)
	unitWithPlanner.Planner = &p
	_, _, err := x.ledger.Begin(ctx, s, unitWithPlanner, 3, x.now(1, time.Second))
	require.ErrorIs(t, err, ledger.ErrInvalidFence, "a unit-scoped fence with a Planner")

	slotPlanner := perSlot(7)
	wrong := perSlot(5) // a Planner with the slot's scope
	slotPlanner.Planner = &wrong
	_, _, err = x.ledger.Begin(ctx, s, slotPlanner, 3, x.now(1, 2*time.Second))
	require.ErrorIs(t, err, ledger.ErrUnknownScope, "a Planner with the slot scope")
	x.requireAbsent(s)
}
