package quorum

import (
	"errors"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/stretchr/testify/require"
)

func TestOnlyAMajorityHolderStopsTheRetries(t *testing.T) {
	t.Parallel()
	g := func(c int64) reply { return reply{state: granted, value: c} }
	r := func(holder string, pttl int64) reply { return reply{state: refused, holder: holder, value: pttl} }
	f := reply{state: failed}
	var n reply // no answer yet
	for _, tc := range []struct {
		name    string
		replies []reply
		held    bool
	}{
		{"two holders of two, we have one", []reply{g(1), r("x", 9), r("x", 9), r("y", 9), r("y", 9)}, false},
		{"a holder of three", []reply{g(1), r("x", 9), r("x", 9), r("x", 9), r("y", 9)}, true},
		{"a holder of four", []reply{r("x", 9), r("x", 9), r("x", 9), r("x", 9), n}, true},
		// Masters that did not answer in time may be x's or free: x
		// may have split with other racers and released already.
		{"one unknown could give x a majority", []reply{g(1), r("x", 9), r("x", 9), r("y", 9), n}, false},
		{"one unknown cannot", []reply{g(1), r("x", 9), r("y", 9), r("z", 9), n}, false},
		{"a failed master could be x's", []reply{g(1), r("x", 9), r("x", 9), r("y", 9), f}, false},
		{"we could have a majority", []reply{g(1), g(2), r("x", 9), n, n}, false},
	} {
		require.Equal(t, tc.held, count(tc.replies).heldByMajority(3), tc.name)
	}
}

func TestRemainingIsWhenAMajorityCanBeFree(t *testing.T) {
	t.Parallel()
	g := reply{state: granted, value: 1}
	r := func(pttl int64) reply { return reply{state: refused, value: pttl, holder: "x"} }
	// We had 1: two of the holders' keys must expire, the shortest first.
	v := count([]reply{g, r(900), r(300), r(600), r(100)})
	require.Equal(t, 300*time.Millisecond, v.remaining(3))
	// Nothing granted: the third shortest.
	v = count([]reply{r(900), r(300), r(600), r(100), r(50)})
	require.Equal(t, 300*time.Millisecond, v.remaining(3))
	// Fewer refusals than needed (the rest failed): the longest known.
	v = count([]reply{r(900), r(300), {state: failed}, {state: failed}, {state: failed}})
	require.Equal(t, 900*time.Millisecond, v.remaining(3))
	// A key about to expire still reports a positive wait.
	v = count([]reply{r(0), r(0), r(0), g, g})
	require.Equal(t, time.Millisecond, v.remaining(3))
}

func TestTallyCountsRedsyncErrors(t *testing.T) {
	t.Parallel()
	err := errors.Join(
		errors.Join(&redsync.RedisError{Node: 0, Err: errors.New("down")}, redsync.ErrLockAlreadyExpired),
		&redsync.ErrNodeTaken{Node: 2},
		redsync.ErrLockAlreadyExpired,
	)
	refused, failed := tally(err)
	require.Equal(t, 3, refused)
	require.Equal(t, 1, failed)
	refused, failed = tally(&redsync.ErrTaken{Nodes: []int{0, 1, 3}})
	require.Equal(t, 3, refused)
	require.Zero(t, failed)
	refused, failed = tally(nil)
	require.Zero(t, refused+failed)
}
