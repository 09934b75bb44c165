package ledgertest

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// fenceCases cover the acceptance rule per (job, partition).
var fenceCases = []testCase{
	{"StaleTokenIsRefusedAndChangesNothing", testStaleTokenRefused},
	{"ZeroTokenIsRefused", testZeroToken},
	{"HolderThatLostTheLeaseCannotWrite", testLostHolderCannotWrite},
	{"PartitionsAreIndependent", testPartitionsIndependent},
	{"ConcurrentBeginsAcceptIncreasingTokens", testConcurrentBegins},
}

// Holder 5 began slot 0. A smaller token, the same token by another
// owner, and a smaller token by holder 5's owner are refused on every
// fenced transition, and leave the ledger as it was.
func testStaleTokenRefused(t *testing.T, x *fixture) {
	ctx := t.Context()
	cur := holder(5)
	s1, s2, s3 := x.slot(1), x.slot(2), x.slot(3)
	n := x.begin(s1, cur, 3, x.now(1, time.Second))
	require.NoError(t, x.ledger.Heartbeat(ctx, s1, cur, n, x.now(1, 2*time.Second)))
	before := x.get(s1)
	stBefore := x.state("", x.at(0))

	stale := map[string]ledger.Fence{
		"smaller token":                {Scope: unitMark, Token: cur.Token - 1, Owner: holder(4).Owner},
		"equal token, another owner":   {Scope: unitMark, Token: cur.Token, Owner: "intruder"},
		"smaller token, current owner": {Scope: unitMark, Token: cur.Token - 1, Owner: cur.Owner},
	}
	for what, f := range stale {
		now := x.now(1, 30*time.Second)
		_, _, err := x.ledger.Begin(ctx, s1, f, 3, now)
		requireStale(t, err, f.Token, cur.Token, what+": Begin of the running slot")
		_, _, err = x.ledger.Begin(ctx, s2, f, 3, now)
		requireStale(t, err, f.Token, cur.Token, what+": Begin of a new slot")
		err = x.ledger.Heartbeat(ctx, s1, f, n, now)
		requireStale(t, err, f.Token, cur.Token, what+": Heartbeat")
		err = x.ledger.Finish(ctx, s1, f, n, ledger.Outcome{Status: ledger.StatusSucceeded}, now)
		requireStale(t, err, f.Token, cur.Token, what+": Finish")
		err = x.ledger.Skip(ctx, s3, f, ledger.StatusSkipped, "overlap", now)
		requireStale(t, err, f.Token, cur.Token, what+": Skip")
	}

	requireSameRecord(t, before, x.get(s1), "the running slot after stale writes")
	x.requireAbsent(s2)
	x.requireAbsent(s3)
	stAfter := x.state("", x.at(0))
	requireTime(t, stBefore.Last, stAfter.Last, "State.Last")
	require.Equal(t, x.openAt(stBefore), x.openAt(stAfter), "State.Open")

	// The fence was neither lowered nor handed over: the holder goes on.
	require.NoError(t, x.ledger.Heartbeat(ctx, s1, cur, n, x.now(1, 40*time.Second)))
	x.succeed(s1, cur, n, x.now(1, 50*time.Second))
	require.Equal(t, ledger.StatusSucceeded, x.get(s1).Status)
}

func testZeroToken(t *testing.T, x *fixture) {
	ctx := t.Context()
	s := x.slot(0)
	f := ledger.Fence{Scope: unitMark, Token: fence.None, Owner: "owner-0"}
	_, _, err := x.ledger.Begin(ctx, s, f, 3, x.now(0, time.Second))
	require.Error(t, err, "Begin with token 0")
	require.True(t, errors.Is(err, fence.ErrNoToken) || errors.Is(err, fence.ErrStaleToken),
		"Begin with token 0: want fence.ErrNoToken or fence.ErrStaleToken, got %v", err)
	err = x.ledger.Skip(ctx, s, f, ledger.StatusSkipped, "overlap", x.now(0, time.Second))
	require.Error(t, err, "Skip with token 0")
	x.requireAbsent(s)
}

// The fence is per (job, partition), not per slot: once holder 2 began any
// slot, holder 1 can no longer finish, heartbeat, skip or begin any slot of
// the pair, including the one it was running.
func testLostHolderCannotWrite(t *testing.T, x *fixture) {
	ctx := t.Context()
	a, b := holder(1), holder(2)
	s1, s2, s3 := x.slot(1), x.slot(2), x.slot(3)
	n := x.begin(s1, a, 3, x.now(1, time.Second))
	x.begin(s2, b, 3, x.now(2, time.Second))
	before := x.get(s1)

	now := x.now(2, 10*time.Second)
	err := x.ledger.Finish(ctx, s1, a, n, ledger.Outcome{Status: ledger.StatusSucceeded}, now)
	requireStale(t, err, a.Token, b.Token, "Finish by the holder that lost the lease")
	err = x.ledger.Heartbeat(ctx, s1, a, n, now)
	requireStale(t, err, a.Token, b.Token, "Heartbeat by the holder that lost the lease")
	err = x.ledger.Skip(ctx, s3, a, ledger.StatusSkipped, "overlap", now)
	requireStale(t, err, a.Token, b.Token, "Skip by the holder that lost the lease")
	_, _, err = x.ledger.Begin(ctx, s3, a, 3, now)
	requireStale(t, err, a.Token, b.Token, "Begin by the holder that lost the lease")

	requireSameRecord(t, before, x.get(s1), "the lost holder's slot")
	x.requireAbsent(s3)

	// The new holder takes the slot over.
	require.Equal(t, 2, x.begin(s1, b, 3, x.now(2, 20*time.Second)))
	x.succeed(s1, b, 2, x.now(2, 30*time.Second))
	rec := x.get(s1)
	require.Equal(t, ledger.StatusSucceeded, rec.Status)
	require.Equal(t, ledger.StatusAbandoned, rec.Attempts[0].Status)
}

// Each partition has its own fence and its own records; the pause flag is
// the only thing they share (see PauseIsPerJobAcrossPartitions).
func testPartitionsIndependent(t *testing.T, x *fixture) {
	ctx := t.Context()
	big, small := holder(9), holder(3)
	sa, sb := x.slotIn("eu", 0), x.slotIn("us", 0)

	require.Equal(t, 1, x.begin(sa, big, 3, x.now(0, time.Second)))
	// A smaller token is accepted in another partition...
	require.Equal(t, 1, x.begin(sb, small, 3, x.now(0, 2*time.Second)))
	x.succeed(sb, small, 1, x.now(0, 3*time.Second))
	// ...and refused in the partition the bigger one touched.
	_, _, err := x.ledger.Begin(ctx, x.slotIn("eu", 1), small, 3, x.now(1, time.Second))
	requireStale(t, err, small.Token, big.Token, "Begin in the other partition")

	recA, recB := x.get(sa), x.get(sb)
	require.Equal(t, ledger.StatusRunning, recA.Status)
	require.Equal(t, big.Owner, recA.Attempts[0].Owner)
	require.Equal(t, ledger.StatusSucceeded, recB.Status)
	require.Equal(t, small.Owner, recB.Attempts[0].Owner)
	x.requireAbsent(x.slot(0)) // the default partition "" is a third one

	x.succeed(sa, big, 1, x.now(0, 4*time.Second))
	x.requireAbsent(x.slotIn("eu", 1))

	// Skips and State are per partition too.
	require.NoError(t, x.ledger.Skip(ctx, x.slotIn("us", 5), small, ledger.StatusMissed, "downtime", x.now(5, 0)))
	requireTime(t, x.at(0), x.state("eu", time.Time{}).Last, "State.Last of eu")
	requireTime(t, x.at(5), x.state("us", time.Time{}).Last, "State.Last of us")
	requireTime(t, time.Time{}, x.state("", time.Time{}).Last, "State.Last of the default partition")
}

// racers lease holders with distinct increasing tokens race Begin on one
// slot. The ledger must act as if they came one at a time: the accepted
// Begins, in attempt order, carry strictly increasing tokens, every other
// Begin is refused as stale, and the largest token is accepted last.
func testConcurrentBegins(t *testing.T, x *fixture) {
	const racers = 16
	ctx := t.Context()
	s := x.slot(0)
	type result struct {
		f       ledger.Fence
		attempt int
		err     error
	}
	results := make([]result, racers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range racers {
		f := holder(i + 1)
		wg.Go(func() {
			<-start
			n, _, err := x.ledger.Begin(ctx, s, f, 10*racers, x.now(0, time.Second))
			results[i] = result{f: f, attempt: n, err: err}
		})
	}
	close(start)
	wg.Wait()

	var accepted []result
	for _, r := range results {
		if r.err == nil {
			accepted = append(accepted, r)
			continue
		}
		var stale *fence.StaleTokenError
		require.True(t, errors.As(r.err, &stale), "Begin by token %d: want nil or a stale-token refusal, got %v", r.f.Token, r.err)
		require.Greater(t, stale.Current, r.f.Token, "refusal of token %d: StaleTokenError.Current", r.f.Token)
	}
	require.NotEmpty(t, accepted)
	slices.SortFunc(accepted, func(p, q result) int { return p.attempt - q.attempt })
	for i, r := range accepted {
		require.Equal(t, i+1, r.attempt, "accepted Begins number their attempts 1, 2, ... without gaps")
		if i > 0 {
			require.Greater(t, r.f.Token, accepted[i-1].f.Token, "attempt %d's token after attempt %d's", r.attempt, i)
		}
	}
	last := accepted[len(accepted)-1]
	require.Equal(t, holder(racers).Token, last.f.Token, "the largest token is never refused")

	rec := x.get(s)
	require.Equal(t, ledger.StatusRunning, rec.Status)
	require.Equal(t, len(accepted), rec.Attempt)
	require.Len(t, rec.Attempts, len(accepted))
	for i, at := range rec.Attempts {
		require.Equal(t, i+1, at.N)
		require.Equal(t, accepted[i].f.Token, at.Token, "Attempt %d's token", at.N)
		require.Equal(t, accepted[i].f.Owner, at.Owner, "Attempt %d's owner", at.N)
		want := ledger.StatusAbandoned
		if i == len(rec.Attempts)-1 {
			want = ledger.StatusRunning
		}
		require.Equal(t, want, at.Status, "Attempt %d's status", at.N)
	}
}
