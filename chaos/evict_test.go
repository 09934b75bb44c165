package chaos

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

// TestEvictedHeldLeaseWithAllowEviction: Redis evicts a held lease's key
// (maxmemory with volatile-ttl: the lease key is the only key with a TTL,
// so it goes first; every volatile-* and allkeys-* policy can do the same),
// on clients that opted in with redislease.Eviction.AllowEviction. A competitor
// takes the lease while the holder still believes it holds it (both_held
// counts those trials), writes, and then the evicted holder's late write
// must be refused by the sink's fence (violations: stale writes accepted);
// the holder must learn of the loss with a cause that names the eviction
// (lost_evicted). Control: the late write through a sink without its fence
// check is accepted, and the checker flags it.
func TestEvictedHeldLeaseWithAllowEviction(t *testing.T) {
	t.Parallel()
	const name = "redis-evict"
	n := trials(100)
	r := newReport(name, n, controls(n))
	s, pool := newSink(t, "chaos_evict_")
	srv := redisproc.Start(t, "--maxmemory", "4mb", "--maxmemory-policy", "volatile-ttl")
	newClient := func() *lease.Client {
		c, err := lease.New(srv.Client(t, fastClient), lease.Options{Prefix: "chaos:", Eviction: redislease.Eviction{AllowEviction: true}})
		require.NoError(t, err)
		return c
	}
	holder, competitor := newClient(), newClient()
	rdb := srv.Client(t)
	bar := newProgress(name, n+r.controls)
	const ttl = 1500 * time.Millisecond

	bothHeld, lostEvicted, refused := 0, 0, 0
	// trial evicts the holder's lease and returns whether the late write
	// of the evicted holder was accepted by the sink and by the checker.
	trial := func(i int, guarded bool) (lateAccepted, stale bool) {
		ctx := trialCtx(t, 30*time.Second)
		lname := fmt.Sprintf("evict-%v-%d", guarded, i)
		resource := "acct:" + lname
		l, err := tryAcquire(ctx, holder, lname, ttl)
		require.NoError(t, err)
		require.NoError(t, s.write(ctx, pool, resource, holderOf(l), "holder", true))

		leaseKey := "chaos:{" + lname + "}"
		srv.Fill(t, func() bool { return rdb.Exists(context.Background(), leaseKey).Val() == 0 })
		require.Zero(t, rdb.Exists(ctx, leaseKey).Val(), "the lease key was evicted")
		srv.Unfill(t)

		next, err := tryAcquire(ctx, competitor, lname, ttl)
		require.NoError(t, err, "the evicted lease is free")
		if l.Err() == nil {
			bothHeld++
		}
		require.Greater(t, next.Token(), l.Token(), "the fence key has no TTL and was kept")
		require.NoError(t, s.write(ctx, pool, resource, holderOf(next), "competitor", true))

		// The evicted holder's in-flight work writes late, with its old
		// token, as work does that has not yet seen its lease end.
		err = s.write(ctx, pool, resource, holderOf(l), "late", guarded)
		switch {
		case err == nil:
			lateAccepted = true
		case isStale(err):
			refused++
		default:
			require.NoError(t, err)
		}
		testutilDone(t, l.Done(), "the evicted holder learns of its loss")
		if errors.Is(l.Err(), lease.ErrEvicted) && errors.Is(l.Err(), lease.ErrNotHeld) {
			lostEvicted++
		} else {
			t.Logf("trial %d: loss cause %v", i, l.Err())
		}
		require.NoError(t, next.Release(ctx))
		es, err := s.effects(ctx, pool, resource)
		require.NoError(t, err)
		return lateAccepted, staleAccepted(es) > 0
	}

	for i := range n {
		accepted, stale := trial(i, true)
		if accepted || stale {
			r.violations++
			t.Logf("trial %d: the evicted holder's late write was accepted", i)
		}
		bar.step()
	}
	// The controls count too: keep the trials' figures.
	trialsLostEvicted, trialsRefused := lostEvicted, refused
	r.ratio("both_held", bothHeld, n)
	r.ratio("lost_evicted", lostEvicted, n)
	r.ratio("late_write_refused", refused, n)
	for i := range r.controls {
		if _, stale := trial(i, false); stale {
			r.fired++
		}
		bar.step()
	}
	r.finish(t)
	require.Equal(t, n, trialsLostEvicted, "every evicted holder's loss names the eviction")
	require.Equal(t, n, trialsRefused, "every late write was refused")
}
