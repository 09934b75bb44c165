package redisledger

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/redislease"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// scriptGate counts the script calls (EVALSHA, EVAL) a client sends,
// plain or pipelined, but those that met NOSCRIPT (a first use, which
// luascript sends again by EVAL), and holds the first one until open is
// closed.
type scriptGate struct {
	calls      atomic.Int64
	held, open chan struct{}
	once       sync.Once
}

func newScriptGate() *scriptGate {
	return &scriptGate{held: make(chan struct{}), open: make(chan struct{})}
}

func isScript(cmd redis.Cmder) bool { n := cmd.Name(); return n == "evalsha" || n == "eval" }

func (g *scriptGate) count(cmd redis.Cmder, err error) {
	if isScript(cmd) && (err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT")) {
		g.calls.Add(1)
	}
}

func (g *scriptGate) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (g *scriptGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if isScript(cmd) {
			g.once.Do(func() { close(g.held); <-g.open })
		}
		err := next(ctx, cmd)
		g.count(cmd, err)
		return err
	}
}

func (g *scriptGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			g.count(cmd, cmd.Err())
		}
		return err
	}
}

// claimed claims the slot at of jobs[i] for owner, one lease each, and
// returns the grants.
func claimed(t *testing.T, s *setup, b *redislease.Backend, jobs []string, at time.Time, owner string) []ledger.ClaimResult {
	t.Helper()
	reqs := make([]ledger.ClaimRequest, len(jobs))
	for i, job := range jobs {
		reqs[i] = claimReq(job, at, owner)
	}
	res, err := s.ledger.ClaimAll(context.Background(), b, reqs, 0, at)
	require.NoError(t, err)
	for i, r := range res {
		require.True(t, r.Grant.Acquired, jobs[i])
		require.Equal(t, 1, r.Begin.Attempt, jobs[i])
	}
	return res
}

// The ends of runs that finish together are joined into one script call,
// and each run gets its own answer: a stale token or a store error of one
// run is that run's only.
func TestFinishesOfConcurrentRunsAreJoined(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		b := joinedSetup(t, s)
		at := time.Unix(1_800_000_000, 0).UTC()
		jobs := []string{"j0", "j1", "j2", "j3", "j4", "j5"}
		res := claimed(t, s, b, jobs, at, "me")

		// j1: a newer holder raised the unit's fence; j2: its run hash is
		// not a hash.
		require.NoError(t, s.ledger.Skip(ctx, ledger.Slot{Job: "j1", At: at.Add(-time.Second)},
			ledger.Fence{Scope: "j1", Token: fence.Token(1) << 62, Owner: "newer"}, ledger.StatusSkipped, "seed", at))
		require.NoError(t, s.rdb.Set(ctx, s.ledger.keys("j2", "").run(at), "not a hash", 0).Err())

		s.ledger.fin.SetInFlight(1)
		g := newScriptGate()
		s.rdb.AddHook(g)
		ferrs, rerrs := make([]error, len(jobs)), make([]error, len(jobs))
		var wg sync.WaitGroup
		finish := func(i int) {
			defer wg.Done()
			h := leasedriver.Held{Name: jobs[i], Owner: "me", TTL: 10 * time.Second, Handle: res[i].Grant.Handle}
			f := ledger.Fence{Scope: jobs[i], Token: res[i].Grant.Token, Owner: "me"}
			ferrs[i], rerrs[i] = s.ledger.FinishRelease(ctx, b, h, ledger.Slot{Job: jobs[i], At: at}, f, 1,
				ledger.Outcome{Status: ledger.StatusSucceeded}, at.Add(time.Second))
		}
		wg.Add(len(jobs))
		go finish(0)
		testwait.Done(t, g.held, 10*time.Second, "the first finish on the wire")
		for i := 1; i < len(jobs); i++ {
			go finish(i)
		}
		testwait.Until(t, 10*time.Second, "the other finishes queued", func() bool { return s.ledger.fin.Queued() == len(jobs)-1 })
		close(g.open)
		wg.Wait()

		require.Equal(t, int64(2), g.calls.Load(), "the first run's script, then one for the 5 queued behind it")
		for _, i := range []int{0, 3, 4, 5} {
			require.NoError(t, ferrs[i], jobs[i])
			require.NoError(t, rerrs[i], jobs[i])
			require.Equal(t, ledger.StatusSucceeded, s.status(jobs[i], "", at), jobs[i])
		}
		require.ErrorIs(t, ferrs[1], fence.ErrStaleToken, "j1's fence was raised past its token")
		require.NoError(t, rerrs[1], "j1's lease is released all the same")
		require.Equal(t, ledger.StatusRunning, s.status("j1", "", at), "j1's refused finish wrote nothing")
		require.ErrorContains(t, ferrs[2], "WRONGTYPE")
		var reply redis.Error
		require.ErrorAs(t, ferrs[2], &reply, "a Redis error reply, as a lone run's")
		require.ErrorContains(t, rerrs[2], "WRONGTYPE", "one script: the release shares the error")
		for i, job := range jobs {
			g, err := b.Acquire(ctx, job, "next", 10*time.Second)
			require.NoError(t, err)
			require.Equal(t, i != 2, g.Acquired, "%s: released unless its run failed", job)
		}
	})
}

// A joined finish of more runs than one script call takes is sent in
// calls of maxFinishBatch runs.
func TestJoinedFinishIsSentInBoundedCalls(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		b := joinedSetup(t, s)
		at := time.Unix(1_800_000_000, 0).UTC()
		jobs := make([]string, maxFinishBatch+3)
		for i := range jobs {
			jobs[i] = fmt.Sprintf("job%d", i)
		}
		res := claimed(t, s, b, jobs, at, "me")
		calls := make([]*finishCall, len(jobs))
		for i, job := range jobs {
			lk, err := b.Keys(job)
			require.NoError(t, err)
			calls[i] = &finishCall{
				base: s.ledger.keys(job, "").base, lease: lk.Lease, at: at,
				args: [9]any{res[i].Grant.Token.String(), "me", unix(at), 1, "succeeded", "", "", millis(at), ""},
			}
		}
		k := s.ledger.keys(jobs[0], "")
		lk, err := b.Keys(jobs[0])
		require.NoError(t, err)
		require.Equal(t, []string{k.unit, k.run(at), k.open, k.retry, k.unit, k.index, lk.Lease, lk.Waiting}, calls[0].keys(),
			"a lone finish's keys")
		g := newScriptGate()
		close(g.open)
		s.rdb.AddHook(g)
		s.ledger.finishMany(ctx, calls)
		require.Equal(t, int64(2), g.calls.Load())
		for i, c := range calls {
			require.NoError(t, c.err, jobs[i])
			require.Equal(t, int64(1), c.released, jobs[i])
			require.Equal(t, int64(1), c.code, jobs[i])
			require.Equal(t, ledger.StatusSucceeded, s.status(jobs[i], "", at), jobs[i])
		}
	})
}
