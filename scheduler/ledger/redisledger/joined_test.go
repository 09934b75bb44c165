package redisledger

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/redislease"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// joinedSetup is a ledger and a lease backend on the same client.
func joinedSetup(t *testing.T, s *setup) *redislease.Backend {
	t.Helper()
	b, err := redislease.NewBackend(s.rdb, redislease.Options{Prefix: redistest.Prefix(t, s.rdb) + "lease:", Holder: "replica-a"})
	require.NoError(t, err)
	return b
}

func claimReq(job string, at time.Time, owner string) ledger.ClaimRequest {
	return ledger.ClaimRequest{
		Lease: leasedriver.AcquireRequest{Name: ledger.UnitScope(job, ""), Owner: owner, TTL: 10 * time.Second},
		Begin: &ledger.BeginRequest{
			Slot: ledger.Slot{Job: job, At: at}, Fence: ledger.Fence{Holder: "sched-a"},
			MaxAttempts: 1, Prev: at.Add(-time.Second), Since: at.Add(-time.Hour),
		},
	}
}

// The joined claim begins a slot only under a lease it took itself, with
// the token it issued, refuses a stale one as Begin does, releases the
// lease of a slot done at once, and past its limit tries no free lease.
func TestRedisLedgerClaimAll(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		b := joinedSetup(t, s)
		at := time.Unix(1_800_000_000, 0).UTC()
		now := at.Add(10 * time.Millisecond)

		// "held": another owner holds the lease; "stale": the ledger's
		// fence holds a token above any the lease issues; "free".
		g, err := b.Acquire(ctx, "held", "other", 10*time.Second)
		require.NoError(t, err)
		require.True(t, g.Acquired)
		require.NoError(t, s.ledger.Skip(ctx, ledger.Slot{Job: "stale", At: at.Add(-time.Second)},
			ledger.Fence{Scope: "stale", Token: fence.Token(1) << 62, Owner: "newer"}, ledger.StatusSkipped, "seed", now))

		res, err := s.ledger.ClaimAll(ctx, b, []ledger.ClaimRequest{
			claimReq("held", at, "me"), claimReq("stale", at, "me"), claimReq("free", at, "me"),
		}, 0, now)
		require.NoError(t, err)

		t.Run("HeldLeaseBeginsNothing", func(t *testing.T) {
			require.NoError(t, res[0].Err)
			require.False(t, res[0].Grant.Acquired)
			require.Nil(t, res[0].Begin)
			require.Equal(t, ledger.Status(""), s.status("held", "", at), "no slot begun without the lease")
		})
		t.Run("StaleTokenIsRefused", func(t *testing.T) {
			require.True(t, res[1].Grant.Acquired)
			require.NotNil(t, res[1].Begin)
			require.ErrorIs(t, res[1].Begin.Err, fence.ErrStaleToken)
			require.Equal(t, ledger.Status(""), s.status("stale", "", at))
		})
		t.Run("FreeLeaseBeginsUnderItsToken", func(t *testing.T) {
			require.True(t, res[2].Grant.Acquired)
			require.Equal(t, &ledger.BeginResult{Attempt: 1, Left: 0, Clear: true}, res[2].Begin)
			rec := s.record(t, "free", "", at)
			require.Equal(t, ledger.StatusRunning, rec.Status)
			require.Equal(t, res[2].Grant.Token, rec.Attempts[0].Token)
			require.Equal(t, "me", rec.Attempts[0].Owner)
			require.Equal(t, "sched-a", rec.Attempts[0].Holder, "the attempt's label (Fence.Holder)")
			info, err := b.Inspect(ctx, "free")
			require.NoError(t, err)
			require.Equal(t, "replica-a", info.Holder, "the joined acquisition stores the lease's label, as Acquire does")
		})
		t.Run("FinishReleaseEndsRunAndLease", func(t *testing.T) {
			f := ledger.Fence{Scope: "free", Token: res[2].Grant.Token, Owner: "me"}
			h := leasedriver.Held{Name: "free", Owner: "me", TTL: 10 * time.Second, Handle: res[2].Grant.Handle}
			ferr, rerr := s.ledger.FinishRelease(ctx, b, h, ledger.Slot{Job: "free", At: at}, f, 1,
				ledger.Outcome{Status: ledger.StatusSucceeded}, now)
			require.NoError(t, ferr)
			require.NoError(t, rerr)
			require.Equal(t, ledger.StatusSucceeded, s.status("free", "", at))
			g, err := b.Acquire(ctx, "free", "next", 10*time.Second)
			require.NoError(t, err)
			require.True(t, g.Acquired, "the lease was released")
			require.NoError(t, b.Release(ctx, leasedriver.Held{Name: "free", Owner: "next"}))
		})
		counter := func(name string) string {
			k, err := b.Keys(name)
			require.NoError(t, err)
			return s.rdb.Get(ctx, k.Fence).Val()
		}
		t.Run("DoneSlotTakesNoLease", func(t *testing.T) {
			before := counter("free")
			res, err := s.ledger.ClaimAll(ctx, b, []ledger.ClaimRequest{claimReq("free", at, "late")}, 0, now)
			require.NoError(t, err)
			require.False(t, res[0].Grant.Acquired)
			require.ErrorIs(t, res[0].Begin.Err, ledger.ErrSlotDone)
			require.Equal(t, before, counter("free"), "no token issued for a slot read done")
			g, err := b.Acquire(ctx, "free", "after", 10*time.Second)
			require.NoError(t, err)
			require.True(t, g.Acquired, "the late claim took no lease")
		})
		t.Run("CheckOnlyReadsADoneSlotAndTakesNoLease", func(t *testing.T) {
			before := counter("free")
			req := claimReq("free", at, "checker")
			req.CheckOnly = true
			s.expireMarkers(t)
			res, err := s.ledger.ClaimAll(ctx, b, []ledger.ClaimRequest{req}, 0, now)
			require.NoError(t, err)
			require.False(t, res[0].Grant.Acquired)
			require.ErrorIs(t, res[0].Begin.Err, ledger.ErrSlotDone)
			require.Equal(t, before, counter("free"), "no token issued for a slot read done")
		})
		t.Run("CheckOnlyTakesTheLeaseOfAnUndoneSlotAndBeginsNothing", func(t *testing.T) {
			req := claimReq("unbegun", at, "checker")
			req.CheckOnly = true
			res, err := s.ledger.ClaimAll(ctx, b, []ledger.ClaimRequest{req}, 0, now)
			require.NoError(t, err)
			require.True(t, res[0].Grant.Acquired)
			require.Equal(t, &ledger.BeginResult{}, res[0].Begin, "not clear: the caller plans")
			require.Equal(t, ledger.Status(""), s.status("unbegun", "", at), "nothing begun")
			require.NoError(t, b.Release(ctx, leasedriver.Held{Name: "unbegun", Owner: "checker"}))
		})
		t.Run("LastSlotLostIsNotClear", func(t *testing.T) {
			// The caller saw a slot recorded (Seen) that the ledger no
			// longer has: a store that lost its data. The lease is taken,
			// nothing begun: the caller plans and finds the reset.
			req := claimReq("wiped", at, "me")
			req.Begin.Seen = at.Add(-time.Second)
			res, err := s.ledger.ClaimAll(ctx, b, []ledger.ClaimRequest{req}, 0, now)
			require.NoError(t, err)
			require.True(t, res[0].Grant.Acquired)
			require.Equal(t, &ledger.BeginResult{}, res[0].Begin, "not clear")
			require.Equal(t, ledger.Status(""), s.status("wiped", "", at), "nothing begun")
			require.NoError(t, b.Release(ctx, leasedriver.Held{Name: "wiped", Owner: "me"}))
		})
		t.Run("RunningSlotOfAnotherHolderIsAnsweredHeld", func(t *testing.T) {
			first, err := s.ledger.ClaimAll(ctx, b, []ledger.ClaimRequest{claimReq("running", at, "winner")}, 0, now)
			require.NoError(t, err)
			require.True(t, first[0].Grant.Acquired)
			before := counter("running")
			s.expireMarkers(t) // else the loser skips the unit, marked claimed (markers_test.go)
			res, err := s.ledger.ClaimAll(ctx, b, []ledger.ClaimRequest{claimReq("running", at, "loser")}, 0, now)
			require.NoError(t, err)
			require.NoError(t, res[0].Err)
			require.False(t, res[0].Grant.Acquired)
			require.Nil(t, res[0].Begin)
			require.Greater(t, res[0].Grant.Remaining, 9*time.Second, "the holder's remaining TTL")
			require.Equal(t, before, counter("running"), "no token issued")
			rec := s.record(t, "running", "", at)
			require.Equal(t, "winner", rec.Attempts[0].Owner)
		})
		t.Run("RunningSlotWhoseLeaseIsGoneIsTakenOver", func(t *testing.T) {
			req := claimReq("orphan", at, "crashed")
			req.Begin.MaxAttempts = 2
			first, err := s.ledger.ClaimAll(ctx, b, []ledger.ClaimRequest{req}, 0, now)
			require.NoError(t, err)
			require.True(t, first[0].Grant.Acquired)
			k, err := b.Keys("orphan")
			require.NoError(t, err)
			require.NoError(t, s.rdb.Del(ctx, k.Lease).Err()) // its TTL ran out
			s.expireMarkers(t)                                // and so did its claim marker's
			req = claimReq("orphan", at, "next")
			req.Begin.MaxAttempts = 2
			res, err := s.ledger.ClaimAll(ctx, b, []ledger.ClaimRequest{req}, 0, now)
			require.NoError(t, err)
			require.True(t, res[0].Grant.Acquired)
			require.Equal(t, &ledger.BeginResult{Attempt: 2, Left: 0, Clear: true}, res[0].Begin)
			rec := s.record(t, "orphan", "", at)
			require.Equal(t, ledger.StatusAbandoned, rec.Attempts[0].Status)
			require.Equal(t, "next", rec.Attempts[1].Owner)
		})
		t.Run("PastTheLimitFreeLeasesAreNotTried", func(t *testing.T) {
			later := at.Add(time.Second)
			res, err := s.ledger.ClaimAll(ctx, b, []ledger.ClaimRequest{
				claimReq("a", later, "me"), claimReq("held", later, "me"), claimReq("b", later, "me"),
			}, 1, now)
			require.NoError(t, err)
			require.True(t, res[0].Grant.Acquired)
			require.NoError(t, res[1].Err)
			require.False(t, res[1].Grant.Acquired, "held, told as held")
			require.ErrorIs(t, res[2].Err, leasedriver.ErrNotTried)
			require.Equal(t, ledger.Status(""), s.status("b", "", later))
		})
	})
}

// expireMarkers deletes the ledger's claim markers, as their TTL running
// out would.
func (s *setup) expireMarkers(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	keys, err := s.rdb.Keys(ctx, s.ledger.prefix+"claimed:*").Result()
	require.NoError(t, err)
	if len(keys) > 0 {
		require.NoError(t, s.rdb.Del(ctx, keys...).Err())
	}
}
