package quorum_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/leasetest"
	"github.com/holdfast-go/holdfast/lease/quorum"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

func TestNewRefusesBadMastersAndOptions(t *testing.T) {
	t.Parallel()
	clients := make([]redis.UniversalClient, 6)
	for i := range clients {
		// Never dialled: New does no I/O. The last has the first's address.
		rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(1+i%5)})
		t.Cleanup(func() { _ = rdb.Close() })
		clients[i] = rdb
	}
	for _, tc := range []struct {
		name    string
		masters []redis.UniversalClient
	}{
		{"none", nil},
		{"one", clients[:1]},
		{"even", clients[:4]},
		{"nil", []redis.UniversalClient{clients[0], nil, clients[1]}},
		{"same client twice", []redis.UniversalClient{clients[0], clients[1], clients[0]}},
		{"same address twice", []redis.UniversalClient{clients[0], clients[1], clients[5]}},
	} {
		_, err := quorum.New(tc.masters, quorum.Options{})
		require.ErrorIs(t, err, quorum.ErrInvalidMasters, tc.name)
	}
	for _, opts := range []quorum.Options{
		{Prefix: "a{b}:"},
		{RenewParallelism: -1},
		{SplitRetries: -2},
		{SplitDelay: -time.Millisecond},
		{SettleWait: -time.Millisecond},
		{TokenLead: -2},
		{TokenLead: 2 * time.Hour},
	} {
		_, err := quorum.New(clients[:3], opts)
		require.ErrorIs(t, err, quorum.ErrInvalidOptions, "%+v", opts)
		require.ErrorIs(t, err, errfamily.ErrInvalidOptions, "the family's member (internal/errfamily)")
	}
	b, err := quorum.New(clients[:5], quorum.Options{})
	require.NoError(t, err)
	// The quorum backend stores no holder label: lease.Options.Holder is
	// refused with an error that says so (a fresh user's trial got one
	// naming redislease and pglease only).
	_, err = lease.NewWithBackend(b, lease.Options{Holder: "pod-7"})
	require.ErrorIs(t, err, lease.ErrInvalidOptions)
	require.ErrorContains(t, err, "lease/quorum keeps none")
	_, err = lease.NewWithBackend(b, lease.Options{})
	require.NoError(t, err)
	require.Equal(t, 5, b.Nodes())
	require.Equal(t, 3, b.Quorum())
	leaseKey, fenceKey := b.Keys("job")
	require.Equal(t, redislease.DefaultPrefix+"{job}", leaseKey, "the keys of the single-Redis backend")
	require.Equal(t, leaseKey+":fence", fenceKey)
}

func TestAcquireRaisesAMajorityOfCountersToTheToken(t *testing.T) {
	t.Parallel()
	m := startMasters(t, 5)
	raises := &raiseCounter{}
	for _, rdb := range m.rdbs {
		rdb.AddHook(raises)
	}
	ctx := context.Background()
	// Connections and script caches are warm before counting: a first
	// call can take longer than the proposal's lead.
	warm := m.backend(t)
	_, err := warm.Acquire(ctx, "warm-up", "w", time.Minute)
	require.NoError(t, err)
	require.NoError(t, warm.Release(ctx, leasedriver.Held{Name: "warm-up", Owner: "w"}))
	raised := map[string]int64{}
	far := time.Now().Add(time.Hour).UnixMicro()
	for _, tc := range []struct {
		name    string
		lead    time.Duration
		diverge bool
	}{
		// Every master of the majority answers the proposal: their
		// counters are at the token already.
		{"proposal", 0, false},
		// Each answers its own TIME, rounded up to 10 ms: the
		// same value where the scripts ran within one 10 ms step, raises
		// where they did not.
		{"no-proposal", -1, false},
		// Counters set apart before each acquisition: every master answers
		// a candidate of its own, and the others are raised.
		{"diverged", -1, true},
	} {
		b := m.backend(t, func(o *quorum.Options) { o.TokenLead = tc.lead })
		name := "job-" + tc.name
		leaseKey, fenceKey := b.Keys(name)
		before := raises.n.Load()
		for i := range 20 {
			if tc.diverge {
				for j, rdb := range m.rdbs {
					require.NoError(t, rdb.Set(ctx, fenceKey, far+int64(i*1000+j*10), 0).Err())
				}
			}
			owner := "owner-" + strconv.Itoa(i)
			g, err := b.Acquire(ctx, name, owner, time.Minute)
			require.NoError(t, err)
			require.True(t, g.Acquired)
			atToken, holding := 0, 0
			for _, rdb := range m.rdbs {
				if c, err := rdb.Get(ctx, fenceKey).Uint64(); err == nil && c >= uint64(g.Token) {
					atToken++
				}
				if v, _ := rdb.Get(ctx, leaseKey).Result(); v == owner {
					holding++
				}
			}
			require.GreaterOrEqual(t, atToken, b.Quorum(), "%s %d: a majority of counters is at the token", tc.name, i)
			require.GreaterOrEqual(t, holding, b.Quorum(), "%s %d: a majority holds our key", tc.name, i)
			require.NoError(t, b.Release(ctx, leasedriver.Held{Name: name, Owner: owner}))
			// Release returns once a majority deleted the key; the others
			// follow.
			testwait.Until(t, 5*time.Second, "released on every master", func() bool {
				for _, rdb := range m.rdbs {
					if v, _ := rdb.Get(ctx, leaseKey).Result(); v == owner {
						return false
					}
				}
				return true
			})
		}
		raised[tc.name] = raises.n.Load() - before
	}
	t.Logf("raise scripts for 20 acquisitions: %v", raised)
	require.GreaterOrEqual(t, raised["diverged"], int64(20), "candidates that differ are raised on every acquisition")
	// A proposal can fall behind a master's clock when a script runs more
	// than the lead after it was made (a loaded machine): then that
	// acquisition raises too.
	require.Less(t, raised["proposal"], raised["diverged"]/2, "proposals leave the raise out")
	// Without proposals the raise depends on the masters' clocks agreeing
	// within one 10 ms step, which a loaded machine does not promise: logged,
	// not asserted.
}

// raiseCounter counts the raise scripts sent to a master.
type raiseCounter struct{ n atomic.Int64 }

func (r *raiseCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *raiseCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (r *raiseCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isRaise(cmd) {
			r.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func TestTokensIncreaseWhateverTheProposals(t *testing.T) {
	t.Parallel()
	m := startMasters(t, 5)
	ctx := context.Background()
	// Replicas whose clocks are far apart: one an hour ahead, one
	// without proposals, one as usual. A proposal never lowers a token.
	clients := make([]*lease.Client, 3)
	for i, lead := range []time.Duration{time.Hour, -1, 0} {
		b := m.backend(t, func(o *quorum.Options) { o.TokenLead = lead })
		c, err := lease.NewWithBackend(b, lease.Options{})
		require.NoError(t, err)
		clients[i] = c
	}
	var last fence.Token
	for i := range 90 {
		l, err := clients[(i/10)%3].TryAcquire(ctx, "job", time.Minute)
		require.NoError(t, err, "acquisition %d", i)
		require.Greater(t, l.Token(), last, "acquisition %d", i)
		last = l.Token()
		require.NoError(t, l.Release(ctx))
	}
}

func TestTwoKilledMastersStillAcquireWithIncreasingTokens(t *testing.T) {
	t.Parallel()
	m := startMasters(t, 5)
	c, _ := m.client(t)
	ctx := context.Background()

	first, err := c.TryAcquire(ctx, "job", time.Minute)
	require.NoError(t, err)
	require.NoError(t, first.Release(ctx))
	// A lease held across the kills, renewed every 100 ms.
	const ttl = 300 * time.Millisecond
	kept := held(t, leasetest.TryAcquire(t, c, "kept", ttl))

	m.srvs[1].Kill(t)
	m.srvs[3].Kill(t)
	last := first.Token()
	for i := range 100 {
		start := time.Now()
		l, err := c.TryAcquire(ctx, "job", time.Minute)
		require.NoError(t, err, "acquisition %d with 3 of 5 masters", i)
		require.Less(t, time.Since(start), time.Second)
		require.Greater(t, l.Token(), last, "acquisition %d: tokens strictly increase", i)
		last = l.Token()
		require.NoError(t, l.Release(ctx))
	}
	require.NoError(t, kept.Err(), "a lease survives the loss of a minority")
	require.True(t, time.Until(kept.Deadline()) > 0)
	require.NoError(t, kept.Release(ctx))
}

func TestThreeKilledMastersFailPromptlyWithErrNoQuorum(t *testing.T) {
	t.Parallel()
	m := startMasters(t, 5)
	c, _ := m.client(t)
	ctx := context.Background()
	const ttl = 300 * time.Millisecond
	kept := held(t, leasetest.TryAcquire(t, c, "kept", ttl))

	for _, i := range []int{0, 2, 4} {
		m.srvs[i].Kill(t)
	}
	for i := range 10 {
		start := time.Now()
		l, err := c.TryAcquire(ctx, "job", time.Minute)
		took := time.Since(start)
		require.Nil(t, l)
		require.ErrorIs(t, err, quorum.ErrNoQuorum, "try %d", i)
		require.NotErrorIs(t, err, lease.ErrNotAcquired)
		var nq *quorum.NoQuorumError
		require.ErrorAs(t, err, &nq)
		require.Equal(t, "acquire", nq.Op)
		require.Equal(t, 5, nq.Nodes)
		require.Equal(t, 3, nq.Quorum)
		require.Equal(t, 2, nq.Answered)
		require.Equal(t, 2, nq.Agreed)
		require.Less(t, took, 500*time.Millisecond, "try %d fails promptly", i)
	}
	// The held lease cannot be renewed by a majority: it ends at its
	// trust window.
	testwait.Done(t, kept.Done(), 5*time.Second, "loss without a majority")
	require.ErrorIs(t, kept.Err(), lease.ErrExpired)
}

func TestRenewAndReleaseNeedAMajority(t *testing.T) {
	t.Parallel()
	m := startMasters(t, 5)
	b := m.backend(t)
	ctx := context.Background()
	leaseKey, _ := b.Keys("job")
	acquire := func(owner string) {
		t.Helper()
		g, err := b.Acquire(ctx, "job", owner, time.Minute)
		require.NoError(t, err)
		require.True(t, g.Acquired)
		// Acquire returns once a majority granted; the others follow.
		testwait.Until(t, 5*time.Second, "key on every master", func() bool {
			for _, rdb := range m.rdbs {
				if v, _ := rdb.Get(ctx, leaseKey).Result(); v != owner {
					return false
				}
			}
			return true
		})
	}
	renew := func(owner string) error {
		return b.Renew(ctx, []leasedriver.Held{{Name: "job", Owner: owner, TTL: time.Minute}})[0]
	}
	del := func(nodes ...int) {
		for _, i := range nodes {
			require.NoError(t, m.rdbs[i].Del(ctx, leaseKey).Err())
		}
	}

	acquire("a")
	del(0, 1)
	require.NoError(t, renew("a"), "3 of 5 still ours")
	del(2)
	require.ErrorIs(t, renew("a"), lease.ErrNotHeld, "a majority is not ours")
	require.ErrorIs(t, b.Release(ctx, leasedriver.Held{Name: "job", Owner: "a"}), lease.ErrNotHeld)
	require.ErrorIs(t, b.Release(ctx, leasedriver.Held{Name: "job", Owner: "a"}), lease.ErrNotHeld, "unknown acquisitions are released by owner")

	acquire("b")
	del(0)
	m.srvs[3].Kill(t)
	m.srvs[4].Kill(t)
	err := renew("b")
	require.ErrorIs(t, err, quorum.ErrNoQuorum, "2 extended, 1 refused, 2 down: no majority either way")
	require.NotErrorIs(t, err, lease.ErrNotHeld)
	var nq *quorum.NoQuorumError
	require.ErrorAs(t, err, &nq)
	require.Equal(t, "renew", nq.Op)
	require.Equal(t, 3, nq.Answered)
	require.Equal(t, 2, nq.Agreed)
	err = b.Release(ctx, leasedriver.Held{Name: "job", Owner: "b"})
	require.ErrorIs(t, err, quorum.ErrNoQuorum)
	require.ErrorAs(t, err, &nq)
	require.Equal(t, "release", nq.Op)
}

// gate is a go-redis hook that holds every raise script until open.
type gate struct {
	open    chan struct{}
	arrived atomic.Int64
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isRaise(cmd) {
			g.arrived.Add(1)
			<-g.open
		}
		return next(ctx, cmd)
	}
}

// isRaise reports an EVAL or EVALSHA of the raise script: its only key is
// the fence counter.
func isRaise(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 4 || (cmd.Name() != "evalsha" && cmd.Name() != "eval") {
		return false
	}
	key, _ := args[3].(string)
	return args[2] == 1 && strings.HasSuffix(key, ":fence")
}

func TestAcquireSlowerThanTheTrustWindowIsRefusedAndReleased(t *testing.T) {
	t.Parallel()
	m := startMasters(t, 5)
	g := &gate{open: make(chan struct{})}
	for _, rdb := range m.rdbs {
		rdb.AddHook(g)
	}
	// Without proposals and with counters set apart, the masters answer
	// candidates of their own, so the acquisition raises.
	b := m.backend(t, func(o *quorum.Options) { o.TokenLead = -1 })
	ctx := context.Background()
	_, fenceKey := b.Keys("job")
	for j, rdb := range m.rdbs {
		require.NoError(t, rdb.Set(ctx, fenceKey, int64(1)<<52+int64(j*10), 0).Err())
	}
	const ttl = 50 * time.Millisecond
	type result struct {
		g   leasedriver.Grant
		err error
	}
	got := make(chan result, 1)
	start := time.Now()
	go func() {
		gr, err := b.Acquire(ctx, "job", "slow", ttl)
		got <- result{gr, err}
	}()
	// The lock phase is done and the raise is held until the window has
	// passed.
	testwait.Until(t, 5*time.Second, "raise reached", func() bool { return g.arrived.Load() > 0 })
	testwait.Until(t, 5*time.Second, "trust window passed", func() bool { return time.Since(start) > ttl })
	close(g.open)
	r := <-got
	require.False(t, r.g.Acquired)
	require.ErrorIs(t, r.err, quorum.ErrSlowAcquire)
	require.ErrorIs(t, r.err, lease.ErrSlowAcquire, "the sentinel of every backend")
	var slow *leasedriver.SlowAcquireError
	require.ErrorAs(t, r.err, &slow)
	require.Equal(t, ttl, slow.TTL)
	require.GreaterOrEqual(t, slow.Took, ttl-leasedriver.Drift(ttl))
	leaseKey, _ := b.Keys("job")
	testwait.Until(t, 5*time.Second, "keys released", func() bool {
		for _, rdb := range m.rdbs {
			if v, _ := rdb.Get(ctx, leaseKey).Result(); v == "slow" {
				return false
			}
		}
		return true
	})
}

// scriptCounter counts the acquire script's runs on one master.
type scriptCounter struct{ n atomic.Int64 }

func (s *scriptCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (s *scriptCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A script's run is an EVALSHA the server knew the script of, or the EVAL
// that ran it after a NOSCRIPT reply (a fresh master), which ran nothing:
// counting that EVALSHA too counted the first try twice.
func (s *scriptCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		name := cmd.Name()
		if args := cmd.Args(); len(args) > 2 && (name == "evalsha" || name == "eval") && args[2] == 2 &&
			(err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT")) {
			s.n.Add(1)
		}
		return err
	}
}

func TestSplitVoteIsRetriedAndAMajorityHolderIsNot(t *testing.T) {
	t.Parallel()
	m := startMasters(t, 5)
	counter := &scriptCounter{}
	m.rdbs[0].AddHook(counter)
	b := m.backend(t, func(o *quorum.Options) { o.SplitRetries = 2 })
	ctx := context.Background()
	leaseKey, _ := b.Keys("job")
	hold := func(owner string, nodes ...int) {
		for _, i := range nodes {
			require.NoError(t, m.rdbs[i].Set(ctx, leaseKey, owner, time.Minute).Err())
		}
	}

	// x and y hold two masters each: nobody has a majority.
	hold("x", 1, 2)
	hold("y", 3, 4)
	g, err := b.Acquire(ctx, "job", "z", time.Minute)
	require.NoError(t, err)
	require.False(t, g.Acquired)
	require.Greater(t, g.Remaining, 50*time.Second)
	// One try and two retries, each once the try before is over on every
	// master (its minority released). The last try's command to master 0
	// may be answered after Acquire returned, then undone.
	testwait.Until(t, 5*time.Second, "3 tries on master 0 (a split vote: one try and SplitRetries more), the minority taken released", func() bool {
		v, _ := m.rdbs[0].Get(ctx, leaseKey).Result()
		return counter.n.Load() == 3 && v == ""
	})
	tries := counter.n.Load()

	// x holds a majority: one try.
	hold("x", 3)
	g, err = b.Acquire(ctx, "job", "z", time.Minute)
	require.NoError(t, err)
	require.False(t, g.Acquired)
	testwait.Until(t, 5*time.Second, "the minority taken released", func() bool {
		v, _ := m.rdbs[0].Get(ctx, leaseKey).Result()
		return v == ""
	})
	require.Equal(t, tries+1, counter.n.Load(), "a majority holder: one try")
}

// heldCounter is a lease.Observer counting refused attempts.
type heldCounter struct{ n atomic.Int64 }

func (o *heldCounter) ObserveAcquire(_ string, err error, _ time.Duration) {
	if errors.Is(err, lease.ErrNotAcquired) {
		o.n.Add(1)
	}
}
func (o *heldCounter) ObserveRenew(string, error, time.Duration) {}
func (o *heldCounter) ObserveLoss(string, error)                 {}
func (o *heldCounter) ObserveEvictions(int64)                    {}

func TestWaiterIsWokenByAQuorumRelease(t *testing.T) {
	t.Parallel()
	m := startMasters(t, 5)
	c, _ := m.client(t)
	ctx := context.Background()
	holder, err := c.TryAcquire(ctx, "job", time.Minute)
	require.NoError(t, err)
	held(t, holder)
	// One master is down: the waiter subscribes on the other four.
	m.srvs[2].Kill(t)
	obs := &heldCounter{}
	waiter, _ := m.client(t, func(o *lease.Options) {
		o.RetryMin, o.RetryMax = time.Minute, time.Minute
		o.Observer = obs
	})
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	got := make(chan *lease.Lease, 1)
	go func() {
		l, _ := waiter.Acquire(wctx, "job", time.Minute)
		got <- l
	}()
	// Its second attempt follows its subscription; the next one is a
	// minute away, so only the release can wake it in time.
	testwait.Until(t, 10*time.Second, "waiter subscribed", func() bool { return obs.n.Load() >= 2 })
	released := time.Now()
	require.NoError(t, holder.Release(ctx))
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case l := <-got:
		require.NotNil(t, l)
		held(t, l)
		require.Greater(t, l.Token(), holder.Token())
		require.Less(t, time.Since(released), 10*time.Second)
	case <-timer.C:
		cancel()
		<-got
		t.Fatal("waiter not woken by the release")
	}
}

// TestRedisCommandsNeverShowTheOwner: the text of every command the
// quorum sends to each master (its acquire script, redsync's touch script
// when renewing, the release), as redisotel's tracing hook records it
// (db.statement) and as a logging hook prints it, never holds the owner,
// nor that of a failed acquisition undone on the master that granted it.
// The owner still reaches the masters: another Client cannot take the
// lease, and the holder's renewal and release succeed.
func TestRedisCommandsNeverShowTheOwner(t *testing.T) {
	t.Parallel()
	m := startMasters(t, 3)
	seen := make([]*redistest.Statements, len(m.rdbs))
	for i, rdb := range m.rdbs {
		seen[i] = redistest.RecordStatements(rdb)
	}
	c, _ := m.client(t)
	other, _ := m.client(t)
	ctx := t.Context()
	l, err := c.TryAcquire(ctx, "settle", time.Minute)
	require.NoError(t, err)
	held(t, l)
	require.NoError(t, l.Renew(ctx))
	_, err = other.TryAcquire(ctx, "settle", time.Second)
	require.ErrorIs(t, err, lease.ErrNotAcquired)
	require.NoError(t, l.Release(ctx))
	owner := l.Holder().Owner
	require.NotEmpty(t, owner)

	// A failed acquisition: two masters hold the key for someone else, the
	// third grants it, and the grant is undone there.
	b := m.backend(t)
	const failed = "0f2b2d0e4c3a40c1a5e8f1d2c3b4a596"
	for _, rdb := range m.rdbs[1:] {
		require.NoError(t, rdb.Set(ctx, m.prefix+"{contested}", "someone-else", time.Minute).Err())
	}
	g, err := b.Acquire(ctx, "contested", failed, time.Minute)
	require.NoError(t, err)
	require.False(t, g.Acquired)
	require.Zero(t, m.rdbs[0].Exists(ctx, m.prefix+"{contested}").Val(), "the grant was undone")

	for i, s := range seen {
		require.Empty(t, s.Showing(owner, failed), "master %d: a command shows an owner", i)
		require.Contains(t, s.String(), "[owner]", "master %d", i)
	}
}
