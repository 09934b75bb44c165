package redisledger

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// TestRedisCommandsNeverShowTheOwner: the text of every command the
// ledger sends, as redisotel's tracing hook records it (db.statement) and
// as a logging hook prints it, never holds an owner, for each transition
// that takes one: the joined claim (a begin, and a unit claimed with no
// begin), its joined finish and release, Begin (with a planner),
// BeginIfClear, Heartbeat, Finish and Skip. Each call has an owner of its
// own; the owners still reach the records.
func TestRedisCommandsNeverShowTheOwner(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := t.Context()
		b := joinedSetup(t, s)
		seen := redistest.RecordStatements(s.rdb)
		var owners []string
		owner := func() string {
			o := fmt.Sprintf("%032x", 0xc4cf6eb9f6f8+len(owners))
			owners = append(owners, o)
			return o
		}
		at := time.Unix(1_800_000_000, 0).UTC()

		// The joined claim: "claimed" begins its slot, "held" only takes
		// its unit's lease.
		claim := claimReq("claimed", at, owner())
		held := ledger.ClaimRequest{Lease: leasedriver.AcquireRequest{Name: ledger.UnitScope("held", ""), Owner: owner(), TTL: 10 * time.Second}}
		res, err := s.ledger.ClaimAll(ctx, b, []ledger.ClaimRequest{claim, held}, 0, at)
		require.NoError(t, err)
		require.True(t, res[0].Grant.Acquired)
		require.True(t, res[1].Grant.Acquired)
		require.Equal(t, 1, res[0].Begin.Attempt)
		h := leasedriver.Held{Name: claim.Lease.Name, Owner: claim.Lease.Owner, TTL: claim.Lease.TTL, Handle: res[0].Grant.Handle}
		f := ledger.Fence{Scope: claim.Lease.Name, Token: res[0].Grant.Token, Owner: claim.Lease.Owner}
		ferr, rerr := s.ledger.FinishRelease(ctx, b, h, claim.Begin.Slot, f, 1, ledger.Outcome{Status: ledger.StatusSucceeded}, at.Add(time.Second))
		require.NoError(t, ferr)
		require.NoError(t, rerr)
		require.Equal(t, claim.Lease.Owner, s.record(t, "claimed", "", at).Attempts[0].Owner)

		// Begin of a slot scope under its planner, Heartbeat, Finish.
		slot := ledger.Slot{Job: "allow", At: at}
		planner := ledger.Fence{Scope: ledger.UnitScope("allow", ""), Token: 100, Owner: owner()}
		run := ledger.Fence{Scope: ledger.SlotScope(slot), Token: 101, Owner: owner(), Planner: &planner}
		attempt, _, err := s.ledger.Begin(ctx, slot, run, 1, at)
		require.NoError(t, err)
		run.Planner = nil
		require.NoError(t, s.ledger.Heartbeat(ctx, slot, run, attempt, at))
		require.NoError(t, s.ledger.Finish(ctx, slot, run, attempt, ledger.Outcome{Status: ledger.StatusSucceeded}, at))
		require.Equal(t, run.Owner, s.record(t, "allow", "", at).Attempts[0].Owner)

		// BeginIfClear, then Skip of the next slot.
		clear := ledger.Fence{Scope: ledger.UnitScope("clear", ""), Token: 200, Owner: owner()}
		begun := s.ledger.BeginIfClear(ctx, []ledger.BeginRequest{{Slot: ledger.Slot{Job: "clear", At: at}, Fence: clear, MaxAttempts: 1}}, at)
		require.NoError(t, begun[0].Err)
		require.Equal(t, 1, begun[0].Attempt)
		skip := ledger.Fence{Scope: clear.Scope, Token: 201, Owner: owner()}
		require.NoError(t, s.ledger.Skip(ctx, ledger.Slot{Job: "clear", At: at.Add(time.Second)}, skip, ledger.StatusSkipped, "paused", at))
		require.Equal(t, clear.Owner, s.record(t, "clear", "", at).Attempts[0].Owner)

		require.Empty(t, seen.Showing(owners...), "a command shows an owner")
		require.Contains(t, seen.String(), "[owner]")
	})
}
