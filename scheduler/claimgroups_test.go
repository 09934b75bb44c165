package scheduler

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler/cron"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// With a ledger that marks claim groups, every replica cuts the fires due
// together into the same claim groups (ledger.ClaimGroupEnds over their
// (slot, lease name) order), whatever order its queue gave them in, and
// claims the groups in an order of its own; without, every fire is a
// group of its own, in the queue's order.
func TestClaimGroupsAreTheSameOnEveryReplicaInOrdersOfTheirOwn(t *testing.T) {
	t.Parallel()
	at := time.Unix(1_800_000_000, 0).UTC()
	var units []*unit
	for i := range 500 {
		units = append(units, &unit{lease: ledger.UnitScope(fmt.Sprintf("job%d", i%7), fmt.Sprintf("p%03d", i))})
	}
	fires := func(seed uint64) []*entry {
		es := make([]*entry, 0, 2*len(units))
		for _, u := range units {
			for _, a := range []time.Time{at, at.Add(time.Second)} {
				es = append(es, &entry{u: u, req: claimReq{fire: cron.Fire{At: a}}})
			}
		}
		r := rand.New(rand.NewPCG(seed, seed))
		r.Shuffle(len(es), func(i, j int) { es[i], es[j] = es[j], es[i] })
		return es
	}
	key := func(g []*entry) string {
		var b strings.Builder
		for _, e := range g {
			fmt.Fprintf(&b, "%s@%d,", e.u.lease, e.req.fire.At.Unix())
		}
		return b.String()
	}
	replica := func(seed uint64) (order []string) {
		s := &Scheduler{rand: rand.New(rand.NewPCG(seed, 1)), grouped: true}
		for _, g := range s.claimGroups(fires(seed)) {
			require.NotEmpty(t, g)
			for i, e := range g {
				require.Equal(t, g[0].req.fire.At, e.req.fire.At, "one slot per group")
				if i > 0 {
					require.Less(t, g[i-1].u.lease, e.u.lease, "by lease name within a group")
				}
				if i < len(g)-1 {
					require.False(t, ledger.ClaimGroupEnds(e.u.lease, e.req.fire.At, e.req.fire.At), "a group ends only at its last unit")
				}
			}
			order = append(order, key(g))
		}
		return order
	}
	a, b := replica(1), replica(2)
	require.Greater(t, len(a), 2*500/ledger.ClaimGroupSize/2, "about 1,000/16 groups")
	require.NotEqual(t, a, b, "each replica in an order of its own")
	slices.Sort(a)
	slices.Sort(b)
	require.Equal(t, a, b, "the same groups on both")
	var all int
	for _, k := range a {
		all += strings.Count(k, ",")
	}
	require.Equal(t, 1000, all, "every fire in one group")
}

func TestClaimGroupsWithoutMarkersKeepTheQueueOrder(t *testing.T) {
	t.Parallel()
	at := time.Unix(1_800_000_000, 0).UTC()
	var es []*entry
	for i := range 40 {
		es = append(es, &entry{u: &unit{lease: fmt.Sprintf("job|p%03d", 39-i)}, req: claimReq{fire: cron.Fire{At: at}}})
	}
	s := &Scheduler{rand: rand.New(rand.NewPCG(1, 1))}
	groups := s.claimGroups(slices.Clone(es))
	require.Len(t, groups, len(es))
	for i, g := range groups {
		require.Equal(t, []*entry{es[i]}, g)
	}
}
