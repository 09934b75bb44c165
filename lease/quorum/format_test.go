package quorum_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/lease/quorum"
)

// Every master carries lease/redislease's format marker under the prefix;
// one master holding another format refuses the acquisition, whatever
// the others say, and nothing is taken.
func TestQuorumChecksEveryMastersFormat(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m := startMasters(t, 3)
	b := m.backend(t)
	g, err := b.Acquire(ctx, "job", "owner-1", time.Minute)
	require.NoError(t, err)
	require.True(t, g.Acquired)
	for _, rdb := range m.rdbs {
		require.Equal(t, "holdfast lease/redislease format 1", rdb.Get(ctx, m.prefix+"format").Val())
	}

	m = startMasters(t, 3)
	require.NoError(t, m.rdbs[1].Set(ctx, m.prefix+"format", "holdfast lease/redislease format 2", 0).Err())
	_, err = m.backend(t).Acquire(ctx, "job", "owner-1", time.Minute)
	require.ErrorIs(t, err, fence.ErrUnknownFormat)
	var fe *fence.FormatError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "holdfast lease/redislease format 2", fe.Found)
	for _, rdb := range m.rdbs {
		require.Zero(t, rdb.Exists(ctx, m.prefix+"{job}").Val(), "no lock taken")
	}
}

// A master that does not answer at the first acquisition does not stop a
// majority; it is checked when it answers again, and its refusal reaches
// the next acquisition even when its check answered after the one that
// started it had gone on (StragglerWait; a busy host). The master holds
// the other format from the start: a master restarted empty and written
// afterwards could be marked format 1 by the straggling check in between.
func TestQuorumFormatCheckWithAMasterDown(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m := startMasters(t, 3)
	b := m.backend(t)
	require.NoError(t, m.rdbs[2].Set(ctx, m.prefix+"format", "holdfast lease/redislease format 2", 0).Err())
	m.srvs[2].Pause(t)
	g, err := b.Acquire(ctx, "job", "owner-1", time.Minute)
	m.srvs[2].Resume(t)
	require.NoError(t, err)
	require.True(t, g.Acquired, "a majority answered")
	require.Eventually(t, func() bool {
		_, err := b.Acquire(ctx, "job2", "owner-1", time.Minute)
		return errors.Is(err, fence.ErrUnknownFormat)
	}, 10*time.Second, 20*time.Millisecond, "the master back with another format refuses")

	m = startMasters(t, 3)
	b = m.backend(t)
	m.srvs[1].Kill(t)
	m.srvs[2].Kill(t)
	_, err = b.Acquire(ctx, "job", "owner-1", time.Minute)
	var nq *quorum.NoQuorumError
	require.ErrorAs(t, err, &nq)
	require.Equal(t, "format", nq.Op)
}

// Acquisitions made at once on a new Backend all wait for the format
// checks, whichever call started them (found by a fresh user's trial: 7 of
// 8 concurrent first acquisitions failed with "format: no majority: 0 of
// 3 masters answered", every master up, because a call skipped the
// masters whose check another call had started and counted none passed).
// The checks answer 5 ms late, so that the calls overlap them.
func TestConcurrentFirstAcquisitionsWaitForTheFormatCheck(t *testing.T) {
	t.Parallel()
	m := startMasters(t, 3)
	rdbs := make([]redis.UniversalClient, len(m.srvs))
	for i, srv := range m.srvs {
		rdb := srv.Client(t)
		rdb.AddHook(lateBy(5 * time.Millisecond))
		rdbs[i] = rdb
	}
	for round := range 5 {
		b, err := quorum.New(rdbs, quorum.Options{Prefix: m.prefix})
		require.NoError(t, err)
		const calls = 8
		errs := make([]error, calls)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range calls {
			wg.Go(func() {
				<-start
				g, err := b.Acquire(t.Context(), fmt.Sprintf("job-%d-%d", round, i), "owner", time.Minute)
				if err == nil && !g.Acquired {
					err = errors.New("not acquired")
				}
				errs[i] = err
			})
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			require.NoError(t, err, "round %d, call %d", round, i)
		}
	}
}
