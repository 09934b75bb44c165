package ledgertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// readCases cover Get and List.
var readCases = []testCase{
	{"GetOfUnknownSlotIsNotFound", testGetUnknown},
	{"ListIsNewestFirstWithinRange", testList},
}

func testGetUnknown(t *testing.T, x *fixture) {
	x.requireAbsent(x.slot(0))
	x.begin(x.slot(0), holder(1), 3, x.now(0, 0))
	x.requireAbsent(x.slot(1))                                             // another instant
	x.requireAbsent(x.slotIn("eu", 0))                                     // another partition
	x.requireAbsent(ledger.Slot{Job: x.job + "-other", At: x.at(0)})       // another job
	x.requireAbsent(ledger.Slot{Job: x.job, At: x.at(0).Add(time.Second)}) // a second later
}

func testList(t *testing.T, x *fixture) {
	ctx := t.Context()
	h := holder(1)
	for i := range 5 {
		n := x.begin(x.slot(i), h, 3, x.now(i, 0))
		if i%2 == 0 {
			x.succeed(x.slot(i), h, n, x.now(i, time.Second))
		}
	}
	require.NoError(t, x.ledger.Skip(ctx, x.slot(5), h, ledger.StatusSkipped, "overlap", x.now(5, 0)))
	x.begin(x.slotIn("eu", 2), h, 3, x.now(2, 0)) // another partition

	list := func(from, to time.Time, limit int) []time.Time {
		recs, err := x.ledger.List(ctx, x.job, "", from, to, limit)
		require.NoError(t, err)
		at := make([]time.Time, 0, len(recs))
		for _, r := range recs {
			require.Equal(t, x.job, r.Slot.Job)
			require.Equal(t, "", r.Slot.Partition)
			at = append(at, ms(r.Slot.At))
		}
		return at
	}
	want := func(is ...int) []time.Time {
		at := make([]time.Time, 0, len(is))
		for _, i := range is {
			at = append(at, ms(x.at(i)))
		}
		return at
	}

	require.Equal(t, want(3, 2, 1), list(x.at(1), x.at(4), 10), "from inclusive, to exclusive, newest first")
	require.Equal(t, want(3, 2), list(x.at(1), x.at(4), 2), "limit keeps the newest")
	require.Equal(t, want(5, 4, 3, 2, 1, 0), list(x.at(-10), x.at(10), 100))
	require.Equal(t, want(4), list(x.at(4), x.at(4).Add(time.Second), 10))
	require.Empty(t, list(x.at(6), x.at(10), 10))
	// Bounds within a second (found by a fresh user's trial: the Redis
	// ledger truncated both to whole seconds, so Runs up to time.Now()
	// hid the current second's run).
	half := 500 * time.Millisecond
	require.Equal(t, want(4), list(x.at(4).Add(-half), x.at(4).Add(half), 10), "to within a second after the slot")
	require.Empty(t, list(x.at(4).Add(half), x.at(5), 10), "from within a second after the slot")
	require.Equal(t, want(4, 3), list(x.at(3).Add(-half), x.at(4).Add(time.Microsecond), 10))

	// Listed records are whole: the same as Get returns.
	recs, err := x.ledger.List(ctx, x.job, "", x.at(0), x.at(6), 10)
	require.NoError(t, err)
	require.Len(t, recs, 6)
	for _, rec := range recs {
		requireSameRecord(t, x.get(rec.Slot), rec, "List record vs Get")
	}
	require.Equal(t, ledger.StatusSkipped, recs[0].Status)
	require.Equal(t, ledger.StatusSucceeded, recs[1].Status)
	require.Equal(t, ledger.StatusRunning, recs[2].Status)
	require.Len(t, recs[2].Attempts, 1)
}
