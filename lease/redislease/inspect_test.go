package redislease_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/miniconf"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

// inspectSetup is one backend under a prefix of its own.
type inspectSetup struct {
	rdb    redis.UniversalClient
	prefix string
	b      *redislease.Backend // labelled "replica-a"
}

func newInspectSetup(t *testing.T, rdb redis.UniversalClient) inspectSetup {
	t.Helper()
	prefix := redistest.Prefix(t, rdb)
	b, err := redislease.NewBackend(rdb, redislease.Options{Prefix: prefix, Holder: "replica-a"})
	require.NoError(t, err)
	return inspectSetup{rdb: rdb, prefix: prefix, b: b}
}

func (s inspectSetup) acquire(t *testing.T, name, owner string, ttl time.Duration) leasedriver.Grant {
	t.Helper()
	g, err := s.b.Acquire(context.Background(), name, owner, ttl)
	require.NoError(t, err)
	require.True(t, g.Acquired, "acquired %q", name)
	return g
}

func TestRedisBackendInspect(t *testing.T) {
	t.Parallel()
	for _, be := range redistest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			exerciseInspect(t, newInspectSetup(t, be.New(t)))
		})
	}
}

func exerciseInspect(t *testing.T, s inspectSetup) {
	ctx := context.Background()
	t.Run("HeldShowsOwnerTTLAndToken", func(t *testing.T) {
		g := s.acquire(t, "held", "owner-1", time.Minute)
		info, err := s.b.Inspect(ctx, "held")
		require.NoError(t, err)
		require.True(t, info.Held)
		require.Equal(t, fence.OwnerID("owner-1"), info.OwnerID)
		require.Equal(t, "replica-a", info.Holder)
		require.NotContains(t, fmt.Sprintf("%+v", info), "owner-1", "the owner never leaves in a view")
		require.Equal(t, g.Token, info.Token)
		require.Greater(t, info.TTL, 50*time.Second)
		require.LessOrEqual(t, info.TTL, time.Minute)
		require.False(t, info.Waiting)
	})
	t.Run("NeverAcquiredIsNotAnError", func(t *testing.T) {
		info, err := s.b.Inspect(ctx, "never")
		require.NoError(t, err)
		require.Equal(t, leasedriver.Info{Name: "never"}, info)
	})
	t.Run("ReleasedKeepsTheToken", func(t *testing.T) {
		g := s.acquire(t, "released", "owner-2", time.Minute)
		require.NoError(t, s.b.Release(ctx, leasedriver.Held{Name: "released", Owner: "owner-2", TTL: time.Minute}))
		info, err := s.b.Inspect(ctx, "released")
		require.NoError(t, err)
		require.Equal(t, leasedriver.Info{Name: "released", Token: g.Token}, info)
	})
	t.Run("WaitingFlag", func(t *testing.T) {
		s.acquire(t, "waited", "owner-3", time.Minute)
		g, err := s.b.AcquireWaiting(ctx, "waited", "owner-4", time.Minute, time.Minute)
		require.NoError(t, err)
		require.False(t, g.Acquired)
		info, err := s.b.Inspect(ctx, "waited")
		require.NoError(t, err)
		require.True(t, info.Waiting)
		require.Equal(t, fence.OwnerID("owner-3"), info.OwnerID)
		require.Equal(t, "replica-a", info.Holder, "the waiter's try writes no label")
	})
	t.Run("HolderLabelIsTheCurrentHolders", func(t *testing.T) {
		s.acquire(t, "relabelled", "owner-5", time.Minute)
		require.NoError(t, s.b.Release(ctx, leasedriver.Held{Name: "relabelled", Owner: "owner-5", TTL: time.Minute}))
		unlabelled, err := redislease.NewBackend(s.rdb, redislease.Options{Prefix: s.prefix})
		require.NoError(t, err)
		g, err := unlabelled.Acquire(ctx, "relabelled", "owner-6", time.Minute)
		require.NoError(t, err)
		require.True(t, g.Acquired)
		info, err := s.b.Inspect(ctx, "relabelled")
		require.NoError(t, err)
		require.Equal(t, leasedriver.Info{Name: "relabelled", Held: true, OwnerID: fence.OwnerID("owner-6"), Token: g.Token}, zeroTTL(info),
			"the last holder had no label: none shown, not the one before")
		k, err := s.b.Keys("relabelled")
		require.NoError(t, err)
		stored, err := s.rdb.Get(ctx, k.Holder).Result()
		require.NoError(t, err)
		require.NotEqual(t, g.Token.String()+" replica-a", stored, "the unlabelled acquisition wrote nothing: the key keeps the one before's")
		require.Contains(t, stored, " replica-a")
	})
	t.Run("HolderKeyHoldsTheTokenWithTheLabel", func(t *testing.T) {
		g := s.acquire(t, "stamped", "owner-7", time.Minute)
		k, err := s.b.Keys("stamped")
		require.NoError(t, err)
		stored, err := s.rdb.Get(ctx, k.Holder).Result()
		require.NoError(t, err)
		require.Equal(t, g.Token.String()+" replica-a", stored)
		// A value of another form (a build of main before the token was
		// stored with the label) names no holder.
		require.NoError(t, s.rdb.Set(ctx, k.Holder, "replica-a", 0).Err())
		info, err := s.b.Inspect(ctx, "stamped")
		require.NoError(t, err)
		require.True(t, info.Held)
		require.Empty(t, info.Holder)
	})
	t.Run("InvalidName", func(t *testing.T) {
		_, err := s.b.Inspect(ctx, "a{b}")
		require.ErrorIs(t, err, lease.ErrInvalidName)
	})
}

// An expired lease is not held and keeps its token, on real Redis where
// keys expire by the wall clock.
func TestRedisBackendInspectExpired(t *testing.T) {
	t.Parallel()
	s := newInspectSetup(t, redistest.Real(t))
	g := s.acquire(t, "expiring", "owner", 50*time.Millisecond)
	var info leasedriver.Info
	testwait.Until(t, 5*time.Second, "the lease expires", func() bool {
		var err error
		info, err = s.b.Inspect(context.Background(), "expiring")
		require.NoError(t, err)
		return !info.Held
	})
	require.Equal(t, leasedriver.Info{Name: "expiring", Token: g.Token}, info)
}

// A prefix whose keys are another store's (the scheduler ledger's hashes,
// say) is reported as a wrong prefix, not as Redis's bare WRONGTYPE.
func TestRedisBackendInspectOtherStoresPrefix(t *testing.T) {
	t.Parallel()
	for _, be := range redistest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			rdb := be.New(t)
			prefix := redistest.Prefix(t, rdb)
			b, err := redislease.NewBackend(rdb, redislease.Options{Prefix: prefix})
			require.NoError(t, err)
			k, err := b.Keys("settle")
			require.NoError(t, err)
			require.NoError(t, rdb.HSet(context.Background(), k.Lease, "status", "succeeded").Err())

			_, err = b.Inspect(context.Background(), "settle")
			require.ErrorIs(t, err, lease.ErrInvalidOptions)
			require.ErrorContains(t, err, fmt.Sprintf("the keys under prefix %q are not leases", prefix))
			require.ErrorContains(t, err, "WRONGTYPE", "Redis's answer is kept")
			_, err = b.List(context.Background(), "", 10)
			require.ErrorIs(t, err, lease.ErrInvalidOptions)
		})
	}
}

func TestRedisBackendList(t *testing.T) {
	t.Parallel()
	for _, be := range redistest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			exerciseList(t, newInspectSetup(t, be.New(t)), []string{"job-a", "job-b", "job-c", "other"})
		})
	}
}

// exerciseList lists names, given sorted: all but the last start with
// "job-".
func exerciseList(t *testing.T, s inspectSetup, names []string) {
	ctx := context.Background()
	tokens := map[string]leasedriver.Grant{}
	for _, name := range names {
		tokens[name] = s.acquire(t, name, "owner-"+name, time.Minute)
	}
	// A released lease is still listed (its fence counter remains); keys
	// beside the lease's (election's leader record) add no name.
	released := names[1]
	require.NoError(t, s.b.Release(ctx, leasedriver.Held{Name: released, Owner: "owner-" + released, TTL: time.Minute}))
	k, err := s.b.Keys(names[0])
	require.NoError(t, err)
	require.NoError(t, s.rdb.Set(ctx, k.Tagged("leader"), "x", time.Minute).Err())

	all, err := s.b.List(ctx, "", 100)
	require.NoError(t, err)
	require.Len(t, all, len(names))
	for i, info := range all {
		name := names[i] // names are given sorted
		want := leasedriver.Info{Name: name, Held: true, OwnerID: fence.OwnerID("owner-" + name), Holder: "replica-a", Token: tokens[name].Token}
		if name == released {
			want = leasedriver.Info{Name: name, Token: tokens[name].Token}
		}
		if want.Held {
			require.Greater(t, info.TTL, 50*time.Second, name)
		}
		info.TTL = 0
		require.Equal(t, want, info)
	}

	matched, err := s.b.List(ctx, "job-*", 100)
	require.NoError(t, err)
	require.Equal(t, names[:len(names)-1], infoNames(matched), "all but the last, %q", names[len(names)-1])

	first, err := s.b.List(ctx, "", 2)
	require.NoError(t, err)
	require.Equal(t, names[:2], infoNames(first), "the limit smallest names")

	_, err = s.b.List(ctx, "", 0)
	require.ErrorIs(t, err, lease.ErrInvalidOptions)
	_, err = s.b.List(ctx, "a}", 1)
	require.ErrorIs(t, err, lease.ErrInvalidOptions)
}

func zeroTTL(info leasedriver.Info) leasedriver.Info {
	info.TTL = 0
	return info
}

func infoNames(infos []leasedriver.Info) []string {
	out := make([]string, len(infos))
	for i, info := range infos {
		out[i] = info.Name
	}
	return out
}

// On a Cluster, List scans every master and Inspect reads keys of one
// slot.
//
// It does not call t.Parallel, as TestConformance does not: it starts 3
// redis-servers, and the package's timing-sensitive parallel tests (the
// renewal of 10,000 leases) start only once it is done.
func TestRedisBackendListOnCluster(t *testing.T) {
	cl := redisproc.StartCluster(t, 3)
	s := newInspectSetup(t, cl.Client(t))
	// Names on every master.
	var names []string
	for i := range 12 {
		names = append(names, fmt.Sprintf("job-%02d", i))
	}
	names = append(names, "other")
	seen := map[*redisproc.Server]bool{}
	for _, name := range names {
		k, err := s.b.Keys(name)
		require.NoError(t, err)
		slot, err := s.rdb.ClusterKeySlot(context.Background(), k.Lease).Result()
		require.NoError(t, err)
		seen[cl.NodeForSlot(int(slot))] = true
	}
	require.Len(t, seen, 3, "the names spread over the 3 masters")
	exerciseList(t, s, names)
	exerciseInspect(t, s)
}

// On a Ring, List scans every shard.
func TestRedisBackendListOnRing(t *testing.T) {
	t.Parallel()
	addrs := map[string]string{}
	for _, shard := range []string{"a", "b"} {
		mr := miniredis.RunT(t)
		miniconf.Register(mr)
		addrs[shard] = mr.Addr()
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: addrs})
	t.Cleanup(func() { _ = ring.Close() })
	var names []string
	for i := range 8 {
		names = append(names, fmt.Sprintf("job-%02d", i))
	}
	exerciseList(t, newInspectSetup(t, ring), append(names, "other"))
}

// A prefix holding glob characters is matched literally by List (and so
// by holdfast lease inspect, which lists one escaped name): before, the
// prefix went to SCAN MATCH as a glob and "app[prod]:" found no lease
// while one was held. The match argument stays a glob.
func TestRedisBackendListGlobPrefix(t *testing.T) {
	t.Parallel()
	for _, be := range redistest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			rdb := be.New(t)
			base := redistest.Prefix(t, rdb)
			for _, p := range []string{`app[prod]:`, `a*b?:`, `back\slash:`, `[^x]-]:`} {
				b, err := redislease.NewBackend(rdb, redislease.Options{Prefix: base + p})
				require.NoError(t, err)
				s := inspectSetup{rdb: rdb, b: b}
				g := s.acquire(t, "job-1", "owner-1", time.Minute)
				s.acquire(t, "job-22", "owner-22", time.Minute)
				s.acquire(t, "other", "owner-o", time.Minute)

				all, err := b.List(ctx, "", 100)
				require.NoError(t, err, p)
				require.Equal(t, []string{"job-1", "job-22", "other"}, infoNames(all), "prefix %q", p)
				matched, err := b.List(ctx, "job-?", 100)
				require.NoError(t, err, p)
				require.Len(t, matched, 1, "prefix %q: the match is a glob", p)
				require.Equal(t, leasedriver.Info{Name: "job-1", Held: true, OwnerID: fence.OwnerID("owner-1"), Token: g.Token, TTL: matched[0].TTL}, matched[0])
				require.Positive(t, matched[0].TTL)
			}
		})
	}
}
