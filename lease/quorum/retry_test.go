package quorum_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/quorum"
)

// TestRacersOverSlowMastersExactlyOneWins: 16 acquirers race for a free
// lease, round after round, while two of the five masters answer up to
// 12 ms late (later than StragglerWait): exactly one wins each round. A
// try judged without the slow masters' answers cannot tell a split vote
// from a majority holder hidden behind them; before the retries took that
// case too (and waited for the failed try to be over everywhere), some
// rounds had no winner (3 in 150: the CI failure of
// TestConformance/RacingAcquirersExactlyOneWins) or two (when a retry
// overlapped the failed try: 1 or 2 in 150).
func TestRacersOverSlowMastersExactlyOneWins(t *testing.T) {
	t.Parallel()
	m := startMasters(t, 5)
	clients := racers(t, m, 16, func(node int, rdb *redis.Client) {
		if node >= 3 {
			rdb.AddHook(lateBy(12 * time.Millisecond))
		}
	})
	const rounds = 60
	requireOneWinnerPerRound(t, clients, rounds)
}

// racers returns n lease Clients, each over a Backend of its own on m's
// masters, through clients of their own with generous timeouts (adjust,
// when not nil, may add hooks per master): on a loaded host a reply later
// than the masters' usual 150 ms timeout would fail the try, and a try
// that failed with an error is never retried. SplitRetries is 10: these
// tests are about which tries are retried, not about the default budget
// (5) on a host too loaded to spread 8 racers over 155 ms of pauses (a
// round with no winner in a clean-clone CI run beside busy loops).
func racers(t *testing.T, m *masters, n int, adjust func(node int, rdb *redis.Client)) []*lease.Client {
	t.Helper()
	rdbs := make([]redis.UniversalClient, len(m.srvs))
	for i, srv := range m.srvs {
		rdb := srv.Client(t, func(o *redis.Options) {
			o.DialTimeout, o.ReadTimeout, o.WriteTimeout = 5*time.Second, 5*time.Second, 5*time.Second
			// One dial and no retry, as startMasters': a down master
			// answers at once.
			o.MaxRetries, o.DialerRetries = 1, 1
		})
		if adjust != nil {
			adjust(i, rdb)
		}
		rdbs[i] = rdb
	}
	clients := make([]*lease.Client, n)
	for i := range clients {
		b, err := quorum.New(rdbs, quorum.Options{Prefix: m.prefix, SplitRetries: 10})
		require.NoError(t, err)
		clients[i], err = lease.NewWithBackend(b, lease.Options{})
		require.NoError(t, err)
	}
	return clients
}

// requireOneWinnerPerRound makes clients race TryAcquire for a free name
// of their own, rounds times, and requires exactly one winner each round.
func requireOneWinnerPerRound(t *testing.T, clients []*lease.Client, rounds int) {
	t.Helper()
	ctx := context.Background()
	for round := range rounds {
		name := fmt.Sprintf("race-%d", round)
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			winners []*lease.Lease
		)
		start := make(chan struct{})
		for _, c := range clients {
			wg.Go(func() {
				<-start
				l, err := c.TryAcquire(ctx, name, time.Minute)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					winners = append(winners, held(t, l))
				case !errors.Is(err, lease.ErrNotAcquired):
					t.Errorf("round %d: TryAcquire: %v", round, err)
				}
			})
		}
		close(start)
		wg.Wait()
		require.Len(t, winners, 1, "round %d: exactly one racer wins", round)
		require.NoError(t, winners[0].Release(ctx))
	}
}

// lateBy is a go-redis hook that sends each command after a random delay
// below max: injected latency, the fault under test.
type lateBy time.Duration

func (lateBy) DialHook(next redis.DialHook) redis.DialHook { return next }
func (lateBy) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (l lateBy) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		timer := time.NewTimer(rand.N(time.Duration(l)))
		<-timer.C
		return next(ctx, cmd)
	}
}

// TestRetryWaitsForTheFailedTryOnEveryMaster: a retry after a split vote
// uses the same owner, so it must not start while a command of the failed
// try can still reach a master. Here the failed try's command to master 4
// is held back until after the retry could have taken that master: run
// then, acquire.lua would answer it as granted (the key holds its owner),
// and its undo would delete the retry's key, silently leaving the lease
// on fewer masters than it holds (with several such racers, two owners
// held majorities at once: issue 14's CI run, TestConformance's racers).
// Negative control: with Backend.settle always true, master 4 ends empty
// (it did not while the release hook matched the format check's marker
// script, which has one key too: the try then had no split to retry).
func TestRetryWaitsForTheFailedTryOnEveryMaster(t *testing.T) {
	t.Parallel()
	m := startMasters(t, 5)
	ctx := context.Background()
	// Clients with generous timeouts: on a loaded host a command later than
	// the masters' usual 150 ms would fail the try (or leave a master
	// without the key), which is not what this test is about (a make test
	// beside busy loops: "every master holds the lease for z: not within
	// 5s").
	rdbs := make([]*redis.Client, len(m.srvs))
	masters := make([]redis.UniversalClient, len(m.srvs))
	for i, srv := range m.srvs {
		rdbs[i] = srv.Client(t, func(o *redis.Options) {
			o.DialTimeout, o.ReadTimeout, o.WriteTimeout = 5*time.Second, 5*time.Second, 5*time.Second
			o.MaxRetries, o.DialerRetries = 1, 1
		})
		masters[i] = rdbs[i]
	}
	// SettleWait longer than the test holds the command back.
	b, err := quorum.New(masters, quorum.Options{Prefix: m.prefix, SettleWait: time.Minute})
	require.NoError(t, err)
	leaseKey, _ := b.Keys("job")
	// x holds two masters and y one: the first try takes master 0 and is
	// refused a majority by nobody, a split.
	for node, owner := range map[int]string{1: "x", 2: "x", 3: "y"} {
		require.NoError(t, rdbs[node].Set(ctx, leaseKey, owner, time.Minute).Err())
	}
	// The undo of the first try on master 0 frees x's and y's masters, so
	// that the retry wins.
	rdbs[0].AddHook(&onFirst{match: releaseOf(leaseKey), before: func() {
		for _, node := range []int{1, 2, 3} {
			rdbs[node].Del(ctx, leaseKey)
		}
	}})
	held4 := &onFirst{match: isAcquire, wait: make(chan struct{}), ran: make(chan struct{})}
	rdbs[4].AddHook(held4)

	type result struct {
		g   leasedriver.Grant
		err error
	}
	got := make(chan result, 1)
	go func() {
		g, err := b.Acquire(ctx, "job", "z", time.Minute)
		got <- result{g, err}
	}()
	// The retry waits for master 4: let the first try's command go once
	// Acquire returned (the retry did not wait) or a while passed.
	var r result
	returned := false
	timer := time.NewTimer(300 * time.Millisecond)
	select {
	case r = <-got:
		returned = true
	case <-timer.C:
	}
	timer.Stop()
	close(held4.wait)
	testwait.Done(t, held4.ran, 5*time.Second, "the first try's command to master 4 ran")
	if !returned {
		r = <-got
	}
	require.NoError(t, r.err)
	require.True(t, r.g.Acquired)
	testwait.Until(t, 5*time.Second, "every master holds the lease for z", func() bool {
		for _, rdb := range rdbs {
			if v, _ := rdb.Get(ctx, leaseKey).Result(); v != "z" {
				return false
			}
		}
		return true
	})
}

// onFirst is a go-redis hook acting on the first command that match
// reports: before runs before it is sent; it is held until wait closes
// (nil: not held); ran closes once it was answered (nil: no signal).
type onFirst struct {
	match  func(redis.Cmder) bool
	before func()
	wait   chan struct{}
	ran    chan struct{}
	once   sync.Once
}

func (o *onFirst) DialHook(next redis.DialHook) redis.DialHook { return next }
func (o *onFirst) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (o *onFirst) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		first := false
		if o.match(cmd) {
			o.once.Do(func() { first = true })
		}
		if !first {
			return next(ctx, cmd)
		}
		if o.before != nil {
			o.before()
		}
		if o.wait != nil {
			<-o.wait
		}
		err := next(ctx, cmd)
		if o.ran != nil {
			close(o.ran)
		}
		return err
	}
}

// isAcquire reports an EVAL or EVALSHA of the acquire script (two keys:
// the lease key and its fence counter), NOSCRIPT replies included.
func isAcquire(cmd redis.Cmder) bool {
	name, args := cmd.Name(), cmd.Args()
	return (name == "evalsha" || name == "eval") && len(args) > 2 && args[2] == 2
}

// releaseOf reports an EVAL or EVALSHA of a script whose one key is
// leaseKey: the release script of that lease (the format check's marker
// script has one key too, the Backend's format key: matched by key, it
// took this hook before the try it is about, and the test checked nothing).
func releaseOf(leaseKey string) func(redis.Cmder) bool {
	return func(cmd redis.Cmder) bool {
		name, args := cmd.Name(), cmd.Args()
		if (name != "evalsha" && name != "eval") || len(args) < 4 || args[2] != 1 {
			return false
		}
		key, _ := args[3].(string)
		return key == leaseKey
	}
}

// TestHungMasterDoesNotHoldUpAFailedTry: a try that may be retried waits
// for every master to be over with it, but a master that hangs (SIGSTOP)
// holds it up for Options.SettleWait, not for its client's timeout (a
// minute here): the try is then not retried, and Acquire answers.
func TestHungMasterDoesNotHoldUpAFailedTry(t *testing.T) {
	t.Parallel()
	m := startMasters(t, 5)
	rdbs := make([]redis.UniversalClient, len(m.srvs))
	for i, srv := range m.srvs {
		rdbs[i] = srv.Client(t, func(o *redis.Options) {
			o.ReadTimeout, o.WriteTimeout = time.Minute, time.Minute
		})
	}
	b, err := quorum.New(rdbs, quorum.Options{Prefix: m.prefix})
	require.NoError(t, err)
	ctx := context.Background()
	leaseKey, _ := b.Keys("job")
	// x holds two masters, y one, master 4 hangs: no owner is seen on a
	// majority, a try that may be retried.
	for node, owner := range map[int]string{1: "x", 2: "x", 3: "y"} {
		require.NoError(t, m.rdbs[node].Set(ctx, leaseKey, owner, time.Minute).Err())
	}
	m.srvs[4].Pause(t)
	t.Cleanup(func() { m.srvs[4].Resume(t) })

	got := make(chan error, 1)
	go func() {
		g, err := b.Acquire(ctx, "job", "z", 10*time.Minute)
		if err == nil && g.Acquired {
			err = errors.New("acquired")
		}
		got <- err
	}()
	timer := time.NewTimer(30 * time.Second)
	defer timer.Stop()
	select {
	case err := <-got:
		require.NoError(t, err, "not acquired, no error")
	case <-timer.C:
		t.Fatal("Acquire waited for the hung master's timeout")
	}
}

// TestRacersWithAMasterDownExactlyOneWins: a master that is down (its port
// closed) never ran the acquire script, so a failed try beside it is
// retried like any other (found by a fresh user's trial: with 1 of 3
// masters down, 11 rounds in 30 had no winner, every racer told the free
// lease was held). A reset or timed-out connection stays unknown and is
// not retried.
func TestRacersWithAMasterDownExactlyOneWins(t *testing.T) {
	t.Parallel()
	m := startMasters(t, 3)
	m.srvs[2].Kill(t)
	clients := racers(t, m, 8, nil)
	const rounds = 30
	requireOneWinnerPerRound(t, clients, rounds)
}
