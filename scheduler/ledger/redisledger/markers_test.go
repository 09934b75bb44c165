package redisledger

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// unitReqs are the claim requests of n units of job due at at, for owner.
func unitReqs(job string, n int, at time.Time, owner string) []ledger.ClaimRequest {
	reqs := make([]ledger.ClaimRequest, n)
	for i := range reqs {
		part := fmt.Sprintf("p%03d", i)
		reqs[i] = ledger.ClaimRequest{
			Lease: leasedriver.AcquireRequest{Name: ledger.UnitScope(job, part), Owner: owner, TTL: 10 * time.Second},
			Begin: &ledger.BeginRequest{
				Slot:        ledger.Slot{Job: job, Partition: part, At: at},
				MaxAttempts: 2, Prev: at.Add(-time.Second), Since: at.Add(-time.Hour),
			},
		}
	}
	return reqs
}

// Claim markers: a replica whose ClaimAll tried every unit of a claim
// group marks it, and another replica's ClaimAll of the same group
// answers its units held without trying them; a group left partly
// untried, other slots and other units are tried as before.
func TestRedisLedgerClaimMarkers(t *testing.T) {
	t.Parallel()
	eachBackend(t, claimMarkerCases)
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		claimMarkerCases(t, clusterSetup(t))
	})
}

// clusterSetup is a ledger on a 3-master Redis Cluster of its own, where
// ClaimAll runs one script per unit and sets the markers after them.
func clusterSetup(t *testing.T) *setup {
	t.Helper()
	rdb := redisproc.StartCluster(t, 3).Client(t)
	l, err := New(rdb, Options{Prefix: "cl:ledger:"})
	require.NoError(t, err)
	require.True(t, l.cluster)
	return &setup{rdb: rdb, ledger: l}
}

// claimMarkerCases are TestRedisLedgerClaimMarkers's cases on the
// ledger of s.
func claimMarkerCases(t *testing.T, s *setup) {
	ctx := context.Background()
	b := joinedSetup(t, s)
	at := time.Unix(1_800_000_000, 0).UTC()
	now := at.Add(10 * time.Millisecond)
	begins := func(r ledger.ClaimRequest) *ledger.BeginRequest { return r.Begin }
	acquired := func(res []ledger.ClaimResult) (n int) {
		for _, r := range res {
			if r.Grant.Acquired {
				n++
			}
		}
		return n
	}

	const n = 64
	first, err := s.ledger.ClaimAll(ctx, b, unitReqs("job", n, at, "a"), 0, now)
	require.NoError(t, err)
	require.Equal(t, n, acquired(first), "the first replica takes every free lease")
	groups := s.ledger.claimGroups(unitReqs("job", n, at, "b"), begins)
	require.Greater(t, len(groups), 1, "64 units make several groups")
	require.Equal(t, 0, groups[0].first)
	require.Equal(t, n-1, groups[len(groups)-1].last)

	marked := func(reqs []ledger.ClaimRequest) []bool {
		m, err := s.ledger.markedGroups(ctx, s.ledger.claimGroups(reqs, begins))
		require.NoError(t, err)
		return m
	}
	require.Equal(t, []bool{true}, uniq(marked(unitReqs("job", n, at, "b"))), "every group tried whole is marked")

	// Unit 0's lease is gone (its holder froze past its TTL): a try
	// would take its running slot over.
	lk, err := b.Keys(ledger.UnitScope("job", "p000"))
	require.NoError(t, err)
	require.NoError(t, s.rdb.Del(ctx, lk.Lease).Err())

	t.Run("MarkedGroupIsAnsweredHeldUntried", func(t *testing.T) {
		res, err := s.ledger.ClaimAll(ctx, b, unitReqs("job", n, at, "b"), 0, now)
		require.NoError(t, err)
		for i, r := range res {
			require.NoError(t, r.Err, "unit %d", i)
			require.False(t, r.Grant.Acquired, "unit %d", i)
			require.Zero(t, r.Grant.Remaining, "unit %d: held by its group's marker, not a try (which reads the TTL)", i)
			require.Nil(t, r.Begin, "unit %d", i)
		}
		require.Zero(t, s.rdb.Exists(ctx, lk.Lease).Val(), "unit 0 was not taken over")
	})
	t.Run("WithoutItsMarkerTheGroupIsTried", func(t *testing.T) {
		// The negative control of the one above.
		require.NoError(t, s.rdb.Del(ctx, groups[0].key).Err())
		res, err := s.ledger.ClaimAll(ctx, b, unitReqs("job", n, at, "b"), 0, now)
		require.NoError(t, err)
		require.True(t, res[0].Grant.Acquired, "unit 0, tried, is taken over")
		require.Equal(t, &ledger.BeginResult{Attempt: 2, Left: 0, Clear: true}, res[0].Begin)
		for i := 1; i <= groups[0].last; i++ {
			require.False(t, res[i].Grant.Acquired, "unit %d", i)
			require.Greater(t, res[i].Grant.Remaining, 9*time.Second, "unit %d: tried, its holder's TTL", i)
		}
		for i := groups[0].last + 1; i < n; i++ {
			require.Zero(t, res[i].Grant.Remaining, "unit %d: its group is still marked", i)
		}
		require.Equal(t, []bool{true}, uniq(marked(unitReqs("job", n, at, "c"))), "tried whole again, the group is marked again")
	})
	t.Run("AnotherSlotIsTried", func(t *testing.T) {
		res, err := s.ledger.ClaimAll(ctx, b, unitReqs("job", n, at.Add(time.Second), "b"), 0, now)
		require.NoError(t, err)
		for i := 1; i < n; i++ {
			require.Greater(t, res[i].Grant.Remaining, 9*time.Second, "unit %d: tried, its holder's TTL", i)
		}
	})
	t.Run("UntriedUnitsLeaveTheirGroupUnmarked", func(t *testing.T) {
		reqs := unitReqs("lim", n, at, "a")
		res, err := s.ledger.ClaimAll(ctx, b, reqs, 1, now)
		require.NoError(t, err)
		require.Equal(t, 1, acquired(res))
		m := marked(reqs)
		require.False(t, m[0], "the first group holds untried units")
		require.Equal(t, []bool{false}, uniq(m[1:]))
		res, err = s.ledger.ClaimAll(ctx, b, unitReqs("lim", n, at, "b"), 0, now)
		require.NoError(t, err)
		require.Equal(t, n-1, acquired(res), "another replica takes the units left untried")
	})
	t.Run("MarkerLivesTheGroupsShortestTTLAtMost5s", func(t *testing.T) {
		reqs := unitReqs("ttl", 3, at, "a")
		reqs[1].Lease.TTL = 3 * time.Second
		_, err := s.ledger.ClaimAll(ctx, b, reqs, 0, now)
		require.NoError(t, err)
		for _, g := range s.ledger.claimGroups(reqs, begins) {
			ttl := s.rdb.PTTL(ctx, g.key).Val()
			require.Positive(t, ttl)
			require.LessOrEqual(t, ttl, maxMarkerTTL, "a 10 s lease's group")
			if g.first <= 1 && 1 <= g.last {
				require.LessOrEqual(t, ttl, 3*time.Second)
			} else {
				require.Greater(t, ttl, 3*time.Second)
			}
		}
	})
	t.Run("AFailedUnitLeavesItsGroupUnmarked", func(t *testing.T) {
		reqs := unitReqs("fail", n, at, "a")
		groups := s.ledger.claimGroups(reqs, begins)
		require.Greater(t, len(groups), 1)
		// The last group's first unit's record is of the wrong type:
		// its script fails.
		bad := groups[len(groups)-1].first
		slot := reqs[bad].Begin.Slot
		require.NoError(t, s.rdb.Set(ctx, s.ledger.keys(slot.Job, slot.Partition).unit, "not a hash", 0).Err())
		res, err := s.ledger.ClaimAll(ctx, b, reqs, 0, now)
		require.NoError(t, err)
		require.Error(t, res[bad].Err)
		m := marked(reqs)
		require.False(t, m[len(m)-1], "the group of the unit whose try failed")
		if s.ledger.cluster {
			// One script per unit: the others answered and their
			// groups are marked.
			require.Equal(t, []bool{true}, uniq(m[:len(m)-1]))
			require.Equal(t, n-1, acquired(res))
		}
	})
	t.Run("PausedJobsUnitsAreTriedAndMarked", func(t *testing.T) {
		require.NoError(t, s.rdb.Set(ctx, s.ledger.pausedKey("paused"), "1", 0).Err())
		reqs := unitReqs("paused", n, at, "a")
		res, err := s.ledger.ClaimAll(ctx, b, reqs, 0, now)
		require.NoError(t, err)
		for i, r := range res {
			require.NoError(t, r.Err, "unit %d", i)
			require.True(t, r.Grant.Acquired, "unit %d: its lease is taken", i)
			require.Equal(t, &ledger.BeginResult{}, r.Begin, "unit %d: its slot is not begun (not clear)", i)
		}
		require.Equal(t, []bool{true}, uniq(marked(unitReqs("paused", n, at, "b"))))
	})
}

// uniq returns the distinct values of bs, in order of first appearance.
func uniq(bs []bool) []bool {
	var out []bool
	for _, b := range bs {
		if len(out) == 0 || (len(out) == 1 && out[0] != b) {
			out = append(out, b)
		}
	}
	return out
}
