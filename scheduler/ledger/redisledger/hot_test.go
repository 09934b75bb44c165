package redisledger

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/redislease"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// A slot begun by a claim on a unit with nothing else open is its hot run
// (scripts/fence.lua): no run hash, open or index entry until it ends.
// Every reader sees it as the running slot it is, and every way it can
// end or be touched leaves the same record as a slot begun by Begin (the
// cold path, which writes its run hash at once) does.
func TestHotRunReadsAndEndsAsAColdOne(t *testing.T) {
	t.Parallel()
	outcomes := map[string]ledger.Outcome{
		"Succeeded":     {Status: ledger.StatusSucceeded},
		"FailedForGood": {Status: ledger.StatusFailed, Class: ledger.ClassPermanent, Error: "boom"},
		"FailedWithRetry": {Status: ledger.StatusFailed, Class: ledger.ClassRetryable, Error: "again",
			RetryAt: time.Unix(1_800_000_100, 0)},
		"Deferred": {Status: ledger.StatusFailed, Class: ledger.ClassDeferred, RetryAt: time.Unix(1_800_000_100, 0)},
	}
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		b := joinedSetup(t, s)
		at := time.Unix(1_800_000_000, 0).UTC()
		now := at.Add(10 * time.Millisecond)
		for name, o := range outcomes {
			t.Run(name, func(t *testing.T) {
				hot, cold := "hot-"+name, "cold-"+name
				// The hot run: a claim of a unit with nothing else open.
				res, err := s.ledger.ClaimAll(ctx, b, []ledger.ClaimRequest{claimReq(hot, at, "me")}, 0, now)
				require.NoError(t, err)
				require.Equal(t, &ledger.BeginResult{Attempt: 1, Left: 0, Clear: true}, res[0].Begin)
				k := s.ledger.keys(hot, "")
				require.Zero(t, s.rdb.Exists(ctx, k.run(at), k.open, k.index).Val(), "a hot run has no run hash, open or index entry")
				require.Equal(t, unix(at), s.rdb.HGet(ctx, k.unit, "hot").Val())

				slot := ledger.Slot{Job: hot, At: at}
				f := ledger.Fence{Scope: hot, Token: res[0].Grant.Token, Owner: "me", Holder: "sched-a"}
				rec := s.record(t, hot, "", at)
				require.Equal(t, ledger.StatusRunning, rec.Status)
				require.Equal(t, 1, rec.Attempt)
				require.Equal(t, f.Token, rec.Attempts[0].Token)
				require.Equal(t, "sched-a", rec.Attempts[0].Holder)
				st, err := s.ledger.State(ctx, hot, "", at.Add(-time.Hour), now)
				require.NoError(t, err)
				require.Equal(t, []ledger.OpenSlot{{At: at}}, st.Open, "the hot run is an open slot")
				require.Equal(t, at, st.Last)
				require.Equal(t, now.Truncate(time.Millisecond), st.Horizon)
				recs, err := s.ledger.List(ctx, hot, "", at.Add(-time.Hour), at.Add(time.Hour), 10)
				require.NoError(t, err)
				require.Len(t, recs, 1)
				require.Equal(t, rec, recs[0])
				require.ErrorIs(t, s.ledger.Request(ctx, slot, "again", now), ledger.ErrSlotRunning)
				require.NoError(t, s.ledger.Skip(ctx, slot, f, ledger.StatusSkipped, "late", now))
				require.Equal(t, ledger.StatusRunning, s.status(hot, "", at), "a skip leaves a begun slot alone")
				hb := now.Add(time.Second)
				require.NoError(t, s.ledger.Heartbeat(ctx, slot, f, 1, hb))
				require.Equal(t, hb, s.record(t, hot, "", at).Attempts[0].Heartbeat)
				require.Zero(t, s.rdb.Exists(ctx, k.run(at)).Val(), "the heartbeat of a hot run stays in the unit hash")
				stale := ledger.Fence{Scope: hot, Token: f.Token - 1, Owner: "older"}
				require.ErrorIs(t, s.ledger.Heartbeat(ctx, slot, stale, 1, hb), fence.ErrStaleToken)
				require.ErrorIs(t, s.ledger.Finish(ctx, slot, stale, 1, o, hb), fence.ErrStaleToken)

				// The cold run: the same slot of another unit, begun by Begin.
				cslot := ledger.Slot{Job: cold, At: at}
				cf := ledger.Fence{Scope: cold, Token: f.Token, Owner: "me", Holder: "sched-a"}
				_, err = s.ledger.State(ctx, cold, "", at.Add(-time.Hour), now)
				require.NoError(t, err)
				attempt, _, err := s.ledger.Begin(ctx, cslot, cf, 1, now)
				require.NoError(t, err)
				require.Equal(t, 1, attempt)
				require.NoError(t, s.ledger.Heartbeat(ctx, cslot, cf, 1, hb))

				end := hb.Add(time.Second)
				held := leasedriver.Held{Name: hot, Owner: "me", TTL: 10 * time.Second, Handle: res[0].Grant.Handle}
				ferr, rerr := s.ledger.FinishRelease(ctx, b, held, slot, f, 1, o, end)
				require.NoError(t, ferr)
				require.NoError(t, rerr)
				require.NoError(t, s.ledger.Finish(ctx, cslot, cf, 1, o, end))
				require.False(t, s.rdb.HExists(ctx, k.unit, "hot").Val(), "the hot run ended")

				ck := s.ledger.keys(cold, "")
				require.Equal(t, s.rdb.HGetAll(ctx, ck.run(at)).Val(), s.rdb.HGetAll(ctx, k.run(at)).Val(), "the same run hash")
				for _, z := range []func(ledgerKeys) string{
					func(k ledgerKeys) string { return k.open }, func(k ledgerKeys) string { return k.index },
					func(k ledgerKeys) string { return k.retry }, func(k ledgerKeys) string { return k.pending },
				} {
					require.Equal(t, s.rdb.ZRangeWithScores(ctx, z(ck), 0, -1).Val(), s.rdb.ZRangeWithScores(ctx, z(k), 0, -1).Val())
				}
				hu, cu := s.rdb.HGetAll(ctx, k.unit).Val(), s.rdb.HGetAll(ctx, ck.unit).Val()
				maps.DeleteFunc(hu, func(f, _ string) bool { return len(f) > 4 && f[:4] == "hot." })
				require.Equal(t, cu, hu, "the same unit hash but the hot run's leftover fields")
			})
		}
	})
}

// A hot run whose holder lost its lease is taken over as a cold one is:
// written out, abandoned, and its slot's next attempt begun.
func TestHotRunTakenOver(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		b := joinedSetup(t, s)
		at := time.Unix(1_800_000_000, 0).UTC()
		now := at.Add(10 * time.Millisecond)
		req := claimReq("job", at, "first")
		req.Begin.MaxAttempts = 3
		res, err := s.ledger.ClaimAll(ctx, b, []ledger.ClaimRequest{req}, 0, now)
		require.NoError(t, err)
		require.Equal(t, 1, res[0].Begin.Attempt)
		first := res[0].Grant.Token
		// The first holder's lease is gone (expired); a second claims.
		require.NoError(t, b.Release(ctx, leasedriver.Held{Name: "job", Owner: "first", TTL: 10 * time.Second, Handle: res[0].Grant.Handle}))
		s.expireMarkers(t)
		req = claimReq("job", at, "second")
		req.Begin.MaxAttempts = 3
		res, err = s.ledger.ClaimAll(ctx, b, []ledger.ClaimRequest{req}, 0, now.Add(time.Second))
		require.NoError(t, err)
		require.Equal(t, &ledger.BeginResult{Attempt: 2, Left: 1, Clear: true}, res[0].Begin)
		rec := s.record(t, "job", "", at)
		require.Equal(t, ledger.StatusRunning, rec.Status)
		require.Len(t, rec.Attempts, 2)
		require.Equal(t, ledger.StatusAbandoned, rec.Attempts[0].Status)
		require.Equal(t, first, rec.Attempts[0].Token)
		require.Equal(t, "second", rec.Attempts[1].Owner)
		require.False(t, s.rdb.HExists(ctx, s.ledger.keys("job", "").unit, "hot").Val())
		// The first holder's late finish is refused.
		o := ledger.Outcome{Status: ledger.StatusSucceeded}
		err = s.ledger.Finish(ctx, ledger.Slot{Job: "job", At: at}, ledger.Fence{Scope: "job", Token: first, Owner: "first"}, 1, o, now)
		require.ErrorIs(t, err, fence.ErrStaleToken)
	})
}

// The joined claim takes its leases as Acquire does, the fence counter and
// the holder label expiring after the backend's IdleCounterTTL.
func TestClaimAllKeepsIdleCounterTTL(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		b, err := redislease.NewBackend(s.rdb, redislease.Options{Prefix: redistest.Prefix(t, s.rdb) + "lease:",
			Holder: "replica-a", IdleCounterTTL: 2 * time.Hour})
		require.NoError(t, err)
		at := time.Unix(1_800_000_000, 0).UTC()
		res, err := s.ledger.ClaimAll(ctx, b, []ledger.ClaimRequest{claimReq("idle", at, "me")}, 0, at)
		require.NoError(t, err)
		require.True(t, res[0].Grant.Acquired)
		lk, err := b.Keys("idle")
		require.NoError(t, err)
		for _, key := range []string{lk.Fence, lk.Holder} {
			ttl := s.rdb.PTTL(ctx, key).Val()
			require.Greater(t, ttl, time.Hour, key)
			require.LessOrEqual(t, ttl, 2*time.Hour, key)
		}
	})
}

// CheckPolicy loads the ledger's scripts, so that the first claims find
// them compiled (on a redis-server of its own, whose script cache is
// empty).
func TestCheckPolicyLoadsTheScripts(t *testing.T) {
	t.Parallel()
	rdb := redisproc.Start(t).Client(t)
	l, err := New(rdb, Options{})
	require.NoError(t, err)
	require.False(t, rdb.ScriptExists(context.Background(), claimAllScript.Hash()).Val()[0])
	require.NoError(t, l.CheckPolicy(context.Background()))
	for _, sc := range allScripts {
		require.True(t, rdb.ScriptExists(context.Background(), sc.Hash()).Val()[0])
	}
}

// The end of a hot run is fenced on its fast path too: a newer holder of
// the unit that raised the fence without touching the hot run (a Skip of
// a later slot) makes the hot run's owner stale, and its finish and
// heartbeat are refused. (Its control: the fast path's rule check taken
// out of finish.lua, the stale finish is recorded.)
func TestHotRunEndIsFenced(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		b := joinedSetup(t, s)
		at := time.Unix(1_800_000_000, 0).UTC()
		res, err := s.ledger.ClaimAll(ctx, b, []ledger.ClaimRequest{claimReq("job", at, "me")}, 0, at)
		require.NoError(t, err)
		require.Equal(t, 1, res[0].Begin.Attempt)
		mine := ledger.Fence{Scope: "job", Token: res[0].Grant.Token, Owner: "me"}
		newer := ledger.Fence{Scope: "job", Token: mine.Token + 1, Owner: "newer"}
		later := ledger.Slot{Job: "job", At: at.Add(time.Minute)}
		require.NoError(t, s.ledger.Skip(ctx, later, newer, ledger.StatusSkipped, "test", at))
		require.True(t, s.rdb.HExists(ctx, s.ledger.keys("job", "").unit, "hot").Val(), "the skip left the hot run")

		slot := ledger.Slot{Job: "job", At: at}
		require.ErrorIs(t, s.ledger.Heartbeat(ctx, slot, mine, 1, at.Add(time.Second)), fence.ErrStaleToken)
		err = s.ledger.Finish(ctx, slot, mine, 1, ledger.Outcome{Status: ledger.StatusSucceeded}, at.Add(time.Second))
		var stale *fence.StaleTokenError
		require.ErrorAs(t, err, &stale)
		require.Equal(t, newer.Token, stale.Current)
		require.Equal(t, ledger.StatusRunning, s.status("job", "", at), "the stale finish recorded nothing")
	})
}
