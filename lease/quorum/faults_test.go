package quorum_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/quorum"
)

// TestTokensStrictlyIncreaseThroughAPauseAndARestart runs 1,000 sequential
// acquisitions of one lease on 5 masters while one master is paused
// (SIGSTOP) for a while and another is restarted empty (its keys and its
// fence counter gone). Which masters, when, and for how long are drawn
// from a logged seed, within bounds: the pause starts in the first half
// and lasts 150-400 ms (at most 300 acquisitions); the restart happens in
// the second half. Every successful acquisition must carry a token larger
// than the one before it.
func TestTokensStrictlyIncreaseThroughAPauseAndARestart(t *testing.T) {
	t.Parallel()
	m := startMasters(t, 5)
	c, _ := m.client(t)
	ctx := context.Background()

	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	const runs = 1000
	perm := rng.Perm(5)
	paused, restarted := perm[0], perm[1]
	pauseAt := 100 + rng.IntN(300)
	pauseFor := 150*time.Millisecond + time.Duration(rng.Int64N(int64(250*time.Millisecond)))
	restartAt := 500 + rng.IntN(400)
	t.Logf("pause master %d at acquisition %d for %v; restart master %d at %d", paused, pauseAt, pauseFor, restarted, restartAt)

	const ttl = 500 * time.Millisecond
	var (
		last                fence.Token
		ok, duringPause     int
		afterRestart        int
		pausedSince         time.Time
		pauseOver           bool
		noQuorum, held, slw int
	)
	for i := range runs {
		switch {
		case i == pauseAt:
			m.srvs[paused].Pause(t)
			pausedSince = time.Now()
		case !pausedSince.IsZero() && !pauseOver && (time.Since(pausedSince) > pauseFor || i > pauseAt+300):
			m.srvs[paused].Resume(t)
			pauseOver = true
		case i == restartAt:
			m.srvs[restarted].Restart(t)
		}
		l, err := c.TryAcquire(ctx, "job", ttl)
		switch {
		case errors.Is(err, quorum.ErrNoQuorum):
			noQuorum++
			continue
		case errors.Is(err, lease.ErrNotAcquired):
			// A key left on a majority by a release that did not reach
			// it expires within the TTL.
			held++
			continue
		case errors.Is(err, quorum.ErrSlowAcquire):
			slw++
			continue
		}
		require.NoError(t, err, "acquisition %d", i)
		require.Greater(t, l.Token(), last, "acquisition %d: tokens strictly increase", i)
		last = l.Token()
		ok++
		if !pausedSince.IsZero() && !pauseOver {
			duringPause++
		}
		if i > restartAt {
			afterRestart++
		}
		_ = l.Release(ctx)
	}
	if !pauseOver {
		m.srvs[paused].Resume(t)
	}
	t.Logf("%d of %d acquisitions succeeded, tokens checked in order (%d while master %d was paused, %d after master %d restarted); failed: %d no quorum, %d held, %d too slow",
		ok, runs, duringPause, paused, afterRestart, restarted, noQuorum, held, slw)
	require.Greater(t, duringPause, 0, "acquisitions succeeded while a master was paused")
	require.Greater(t, afterRestart, 0, "acquisitions succeeded after a master restarted")
	require.GreaterOrEqual(t, ok, runs*9/10, "a minority of faulty masters costs few acquisitions")
}
