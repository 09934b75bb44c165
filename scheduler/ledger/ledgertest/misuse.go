package ledgertest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// misuseCases cover calls a ledger must refuse before it touches its store.
var misuseCases = []testCase{
	{"NilContextIsRefusedAndWritesNothing", testNilContext},
}

// testNilContext calls every method, the optional ones the ledger has
// included, with a nil context: each returns an error matching
// ledger.ErrNilContext (never a panic), and the store holds no record,
// pause flag or open slot afterwards.
func testNilContext(t *testing.T, x *fixture) {
	var nilCtx context.Context
	s, h, now := x.slot(0), holder(1), x.now(0, 0)
	refused := func(what string, err error) {
		t.Helper()
		require.ErrorIs(t, err, ledger.ErrNilContext, what)
	}
	_, err := x.ledger.State(nilCtx, x.job, "", x.at(-1), now)
	refused("State", err)
	_, _, err = x.ledger.Begin(nilCtx, s, h, 3, now)
	refused("Begin", err)
	refused("Heartbeat", x.ledger.Heartbeat(nilCtx, s, h, 1, now))
	refused("Finish", x.ledger.Finish(nilCtx, s, h, 1, ledger.Outcome{Status: ledger.StatusSucceeded}, now))
	refused("Skip", x.ledger.Skip(nilCtx, s, h, ledger.StatusSkipped, "overlap: forbid", now))
	refused("Request", x.ledger.Request(nilCtx, s, "operator", now))
	refused("SetPaused", x.ledger.SetPaused(nilCtx, x.job, true))
	_, _, err = x.ledger.Get(nilCtx, s)
	refused("Get", err)
	_, err = x.ledger.List(nilCtx, x.job, "", x.at(-1), x.at(1), 10)
	refused("List", err)
	if r, ok := x.raw.(ledger.StatesReader); ok {
		_, err := r.States(nilCtx, []ledger.StateRequest{{Job: x.job, Since: x.at(-1)}}, now)
		refused("States", err)
	}
	if r, ok := x.raw.(ledger.PauseReader); ok {
		_, err := r.Paused(nilCtx, x.job)
		refused("Paused", err)
	}
	if c, ok := x.raw.(ledger.Canceler); ok {
		refused("RequestCancel", c.RequestCancel(nilCtx, x.job, "", s.At))
	}
	if c, ok := x.raw.(ledger.ClearBeginner); ok {
		res := c.BeginIfClear(nilCtx, []ledger.BeginRequest{{Slot: s, Fence: h, MaxAttempts: 3}}, now)
		require.Len(t, res, 1)
		require.False(t, res[0].Clear)
		refused("BeginIfClear", res[0].Err)
	}
	if p, ok := x.raw.(ledger.Pruner); ok {
		_, err := p.Prune(nilCtx, x.at(1))
		refused("Prune", err)
	}
	if j, ok := x.raw.(ledger.LeaseJoiner); ok {
		_, err := j.ClaimAll(nilCtx, nil, nil, 0, now)
		refused("ClaimAll", err)
		finishErr, releaseErr := j.FinishRelease(nilCtx, nil, leasedriver.Held{}, s, h, 1, ledger.Outcome{Status: ledger.StatusSucceeded}, now)
		refused("FinishRelease (finish)", finishErr)
		refused("FinishRelease (release)", releaseErr)
	}

	_, found, err := x.ledger.Get(t.Context(), s)
	require.NoError(t, err)
	require.False(t, found, "a call with a nil context wrote the slot's record")
	st := x.state("", x.at(-1))
	require.False(t, st.Paused, "SetPaused with a nil context paused the job")
	require.Empty(t, st.Open, "a call with a nil context opened a slot")
}
