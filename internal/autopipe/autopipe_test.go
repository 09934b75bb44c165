package autopipe

import (
	"context"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// gate holds the first plain command until open is closed, and counts
// plain commands and the commands sent in pipelines.
type gate struct {
	held, open  chan struct{}
	once        sync.Once
	plain       atomic.Int64
	pipelines   atomic.Int64
	pipelinedOp atomic.Int64
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "hello" || n == "client" {
			return next(ctx, cmd)
		}
		g.plain.Add(1)
		g.once.Do(func() { close(g.held); <-g.open })
		return next(ctx, cmd)
	}
}

func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() != "client" {
			g.pipelines.Add(1)
			g.pipelinedOp.Add(int64(len(cmds)))
		}
		return next(ctx, cmds)
	}
}

func eachBackend(t *testing.T, fn func(t *testing.T, rdb redis.UniversalClient, prefix string)) {
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb := b.New(t)
			fn(t, rdb, redistest.Prefix(t, rdb))
		})
	}
}

// A lone call is a plain command; on a stop-and-wait pipe (InFlight 1) the
// calls made while it is on the wire go out together in one pipeline, each
// with its own answer; then the pipe is idle again.
func TestCallsQueuedBehindABatchGoOutInOnePipeline(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		g := &gate{held: make(chan struct{}), open: make(chan struct{})}
		rdb.AddHook(g)
		p := NewInFlight(rdb, 1)
		first := make(chan error, 1)
		go func() {
			cmd := redis.NewIntCmd(ctx, "incrby", prefix+"first", 7)
			first <- p.Process(ctx, cmd)
		}()
		<-g.held
		const queued = 12
		got := make(chan int64, queued)
		for i := range queued {
			go func() {
				cmd := redis.NewIntCmd(ctx, "incrby", fmt.Sprintf("%sk%d", prefix, i), i+1)
				if err := p.Process(ctx, cmd); err != nil {
					got <- -1
					return
				}
				got <- cmd.Val()
			}()
		}
		testwait.Until(t, 10*time.Second, "the calls queued behind the first", func() bool { return p.Queued() == queued })
		close(g.open)
		require.NoError(t, <-first)
		sum := int64(0)
		for range queued {
			sum += <-got
		}
		require.Equal(t, int64(queued*(queued+1)/2), sum, "each call got its own answer")
		require.Equal(t, int64(1), g.plain.Load(), "the first went out alone, as a plain command")
		require.Equal(t, int64(1), g.pipelines.Load(), "the queued calls went out in one pipeline")
		require.Equal(t, int64(queued), g.pipelinedOp.Load())
		require.True(t, p.Idle())
	})
}

// Under load every call is answered, leadership keeps moving (no caller
// waits for ever), and the pipe ends idle.
func TestEveryCallIsAnsweredUnderLoad(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		p := New(rdb)
		const workers, rounds = 32, 50
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for range rounds {
					_ = p.Process(ctx, redis.NewIntCmd(ctx, "incr", prefix+"n"))
				}
			})
		}
		wg.Wait()
		n, err := rdb.Get(ctx, prefix+"n").Int()
		require.NoError(t, err)
		require.Equal(t, workers*rounds, n)
		require.True(t, p.Idle())
	})
}

// A call whose ctx already ended sends nothing and says so.
func TestCanceledCallSendsNothing(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		cmd := redis.NewIntCmd(ctx, "incr", prefix+"never")
		require.ErrorIs(t, New(rdb).Process(ctx, cmd), context.Canceled)
		require.ErrorIs(t, cmd.Err(), context.Canceled)
		require.ErrorIs(t, rdb.Get(context.Background(), prefix+"never").Err(), redis.Nil)
	})
}

// A call whose ctx ends while it waits behind a batch leaves the queue:
// its command is never sent, and it returns at once.
func TestQueuedCallLeavesWhenItsContextEnds(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		g := &gate{held: make(chan struct{}), open: make(chan struct{})}
		rdb.AddHook(g)
		p := NewInFlight(rdb, 1)
		first := make(chan error, 1)
		go func() { first <- p.Process(ctx, redis.NewIntCmd(ctx, "incr", prefix+"first")) }()
		<-g.held
		waiting, cancel := context.WithCancel(ctx)
		left := make(chan error, 1)
		go func() { left <- p.Process(waiting, redis.NewIntCmd(waiting, "incr", prefix+"abandoned")) }()
		stays := make(chan error, 1)
		go func() { stays <- p.Process(ctx, redis.NewIntCmd(ctx, "incr", prefix+"sent")) }()
		testwait.Until(t, 10*time.Second, "two calls queued", func() bool { return p.Queued() == 2 })
		cancel()
		require.ErrorIs(t, <-left, context.Canceled)
		require.Equal(t, 1, p.Queued(), "the canceled call left the queue")
		close(g.open)
		require.NoError(t, <-first)
		require.NoError(t, <-stays)
		require.ErrorIs(t, rdb.Get(ctx, prefix+"abandoned").Err(), redis.Nil, "never sent")
		n, err := rdb.Get(ctx, prefix+"sent").Int()
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.True(t, p.Idle())
	})
}

// panicHook panics on the command named boom, once held calls queued.
type panicHook struct{ gate }

func (h *panicHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	inner := h.gate.ProcessHook(next)
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "echo" {
			panic("boom")
		}
		return inner(ctx, cmd)
	}
}

// A panic in go-redis or a hook reaches the caller that sent the command;
// the pipe is not left busy, and the calls queued behind it are answered.
func TestPanicDoesNotWedgeThePipe(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		h := &panicHook{gate{held: make(chan struct{}), open: make(chan struct{})}}
		close(h.open) // no holding
		rdb.AddHook(h)
		p := New(rdb)
		recovered := func() (r any) {
			defer func() { r = recover() }()
			_ = p.Process(ctx, redis.NewStringCmd(ctx, "echo", "x"))
			return nil
		}()
		require.Equal(t, "boom", recovered)
		require.True(t, p.Idle(), "the pipe is idle after the panic")
		cmd := redis.NewIntCmd(ctx, "incr", prefix+"after")
		require.NoError(t, p.Process(ctx, cmd))
		require.Equal(t, int64(1), cmd.Val())
	})
}

// pipePanicHook panics when a pipeline holds an ECHO.
type pipePanicHook struct{ gate }

func (h *pipePanicHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	inner := h.gate.ProcessPipelineHook(next)
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, c := range cmds {
			if c.Name() == "echo" {
				panic("boom in a batch")
			}
		}
		return inner(ctx, cmds)
	}
}

// A panic while a batch is sent reaches its sender; the other calls of the
// batch get an error, and the pipe goes on.
func TestPanicInABatchAnswersTheOthers(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		h := &pipePanicHook{gate{held: make(chan struct{}), open: make(chan struct{})}}
		rdb.AddHook(h)
		p := NewInFlight(rdb, 1)
		first := make(chan error, 1)
		go func() { first <- p.Process(ctx, redis.NewIntCmd(ctx, "incr", prefix+"first")) }()
		<-h.held
		panicked := make(chan any, 1)
		go func() {
			defer func() { panicked <- recover() }()
			_ = p.Process(ctx, redis.NewStringCmd(ctx, "echo", "x"))
		}()
		testwait.Until(t, 10*time.Second, "the echo queued", func() bool { return p.Queued() == 1 })
		other := make(chan error, 1)
		go func() { other <- p.Process(ctx, redis.NewIntCmd(ctx, "incr", prefix+"other")) }()
		testwait.Until(t, 10*time.Second, "both queued", func() bool { return p.Queued() == 2 })
		close(h.open)
		require.NoError(t, <-first)
		require.Equal(t, "boom in a batch", <-panicked)
		require.ErrorIs(t, <-other, errPanicked)
		testwait.Until(t, 10*time.Second, "the pipe idle", p.Idle)
		cmd := redis.NewIntCmd(ctx, "incr", prefix+"after")
		require.NoError(t, p.Process(ctx, cmd))
		require.Equal(t, int64(1), cmd.Val())
	})
}

// holdAll holds every send (a plain command or a pipeline) until open is
// closed, and counts plain commands and the commands sent in pipelines
// (gate holds only the first plain command).
type holdAll struct {
	gate
	onWire     atomic.Int64 // sends held
	cmdsOnWire atomic.Int64 // commands in the sends held
}

// newHoldAll returns a holdAll that lets everything go at the end of the
// test at the latest, so that a failing test does not hang (its cleanup's
// commands go through the hook too).
func newHoldAll(t *testing.T) *holdAll {
	h := &holdAll{gate: gate{open: make(chan struct{})}}
	t.Cleanup(h.release)
	return h
}

func (h *holdAll) release() { h.once.Do(func() { close(h.open) }) }

func (h *holdAll) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if n := cmd.Name(); n == "hello" || n == "client" {
			return next(ctx, cmd)
		}
		h.plain.Add(1)
		h.cmdsOnWire.Add(1)
		h.onWire.Add(1)
		<-h.open
		return next(ctx, cmd)
	}
}

func (h *holdAll) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || cmds[0].Name() == "client" {
			return next(ctx, cmds)
		}
		h.pipelines.Add(1)
		h.pipelinedOp.Add(int64(len(cmds)))
		h.cmdsOnWire.Add(int64(len(cmds)))
		h.onWire.Add(1)
		<-h.open
		return next(ctx, cmds)
	}
}

// heldPipe returns a Pipe over rdb of at most inFlight sends on the wire,
// and the holdAll that holds them there.
func heldPipe(t *testing.T, rdb redis.UniversalClient, inFlight int) (*holdAll, *Pipe) {
	h := newHoldAll(t)
	rdb.AddHook(h)
	return h, NewInFlight(rdb, inFlight)
}

// sendFirst makes a call of p, alone on the wire, that h holds there; its
// error arrives on the channel returned.
func sendFirst(t *testing.T, ctx context.Context, h *holdAll, p *Pipe, key string) <-chan error {
	first := make(chan error, 1)
	go func() { first <- p.Process(ctx, redis.NewIntCmd(ctx, "incr", key)) }()
	testwait.Until(t, 10*time.Second, "the first call on the wire", func() bool { return h.onWire.Load() == 1 })
	return first
}

// gatherFrom makes p's calls gather from n sends on the wire on.
func gatherFrom(p *Pipe, n int) {
	p.gatherFrom = n
	p.j.SetGather(n)
}

// setYield makes p's Joiners call yield where they would yield their
// processor to gather a batch.
func setYield(p *Pipe, yield func()) {
	p.yield = yield
	p.j.yield = yield
}

// A call made while nothing is on the wire goes out at once as a plain
// command and never yields; one made while sends are on the wire, with
// room for more, goes out without waiting for their answers; the calls
// made while InFlight sends are on the wire queue, and the first send to
// end hands them all to one pipeline, in the order they were made.
func TestInFlightBoundsSendsAndBatchesTheRestInOrder(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		const inFlight, queued = 3, 6
		h, p := heldPipe(t, rdb, inFlight)
		gatherFrom(p, 1)
		var yields atomic.Int64
		setYield(p, func() { yields.Add(1) })
		errs := make(chan error, inFlight+queued)
		for i := range inFlight {
			// One at a time: none finds another gathering.
			go func() { errs <- p.Process(ctx, redis.NewIntCmd(ctx, "incrby", fmt.Sprintf("%sp%d", prefix, i), 1)) }()
			testwait.Until(t, 10*time.Second, "the send on the wire", func() bool { return h.onWire.Load() == int64(i+1) })
		}
		require.Equal(t, inFlight, p.InFlight())
		require.Equal(t, int64(inFlight-1), yields.Load(), "every call but the first, made while others were on the wire, gathered")
		for i := range queued {
			go func() { errs <- p.Process(ctx, redis.NewIntCmd(ctx, "rpush", prefix+"order", i)) }()
			testwait.Until(t, 10*time.Second, "the call queued", func() bool { return p.Queued() == i+1 })
		}
		h.release()
		for range inFlight + queued {
			require.NoError(t, <-errs)
		}
		require.Equal(t, int64(inFlight), h.plain.Load(), "no more than InFlight sends, each alone: plain commands")
		require.Equal(t, int64(1), h.pipelines.Load(), "the queued calls went out in one pipeline")
		require.Equal(t, int64(queued), h.pipelinedOp.Load())
		order, err := rdb.LRange(ctx, prefix+"order", 0, -1).Result()
		require.NoError(t, err)
		require.Equal(t, []string{"0", "1", "2", "3", "4", "5"}, order, "the batch ran in the calls' order")
		require.True(t, p.Idle())

		plain := h.plain.Load()
		for range 5 {
			require.NoError(t, p.Process(ctx, redis.NewIntCmd(ctx, "incr", prefix+"lone")))
		}
		require.Equal(t, int64(inFlight-1), yields.Load(), "calls made one after another never yield")
		require.Equal(t, plain+5, h.plain.Load(), "and go out as plain commands")
	})
}

// The calls made while a call gathers a batch (sends are on the wire, with
// room for more) join it and go out with it in one pipeline, in the order
// they were made, while the send ahead of them is still unanswered; one
// whose ctx ends before the batch goes out leaves it and is not sent.
func TestCallsMadeWhileOneGathersGoOutTogetherWithoutWaiting(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		h, p := heldPipe(t, rdb, 4)
		gatherFrom(p, 1)
		yielded, resume := make(chan struct{}), make(chan struct{})
		setYield(p, func() { yielded <- struct{}{}; <-resume })
		first := sendFirst(t, ctx, h, p, prefix+"first")
		errs := make(chan error, 5)
		push := func(ctx context.Context, v string) {
			go func() { errs <- p.Process(ctx, redis.NewIntCmd(ctx, "rpush", prefix+"order", v)) }()
		}
		push(ctx, "a")
		select {
		case <-yielded: // a gathers
		case <-time.After(10 * time.Second):
			t.Fatal("a call made while another was on the wire did not gather")
		}
		push(ctx, "b")
		testwait.Until(t, 10*time.Second, "b joined", func() bool { return p.Gathered() == 1 })
		leaving, leave := context.WithCancel(ctx)
		push(leaving, "gone")
		testwait.Until(t, 10*time.Second, "gone joined", func() bool { return p.Gathered() == 2 })
		push(ctx, "c")
		testwait.Until(t, 10*time.Second, "c joined", func() bool { return p.Gathered() == 3 })
		leave()
		require.ErrorIs(t, <-errs, context.Canceled, "the call whose ctx ended left the batch")
		require.Equal(t, 2, p.Gathered())
		close(resume)
		testwait.Until(t, 10*time.Second, "the batch on the wire beside the first call", func() bool { return h.onWire.Load() == 2 })
		require.Equal(t, int64(1+3), h.cmdsOnWire.Load(), "the first call, and a, b and c in one pipeline")
		require.Equal(t, int64(1), h.pipelines.Load())
		require.Equal(t, int64(1), h.plain.Load())
		h.release()
		require.NoError(t, <-first)
		for range 3 {
			require.NoError(t, <-errs)
		}
		order, err := rdb.LRange(ctx, prefix+"order", 0, -1).Result()
		require.NoError(t, err)
		require.Equal(t, []string{"a", "b", "c"}, order, "in the calls' order, without the one that left")
		require.True(t, p.Idle())
	})
}

// A call whose ctx ends while it gathers a batch that nobody joins leaves:
// its command is not sent, as a queued call made leader after its ctx
// ended is not.
func TestCallWhoseContextEndsWhileItGathersSendsNothing(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		h, p := heldPipe(t, rdb, 4)
		gatherFrom(p, 1)
		first := sendFirst(t, ctx, h, p, prefix+"first")
		gathering, cancel := context.WithCancel(ctx)
		setYield(p, cancel) // its ctx ends while it gathers
		gone := make(chan error, 1)
		go func() { gone <- p.Process(gathering, redis.NewIntCmd(gathering, "incr", prefix+"gone")) }()
		var err error
		testwait.Until(t, 10*time.Second, "the call that gathered returned or was sent", func() bool {
			select {
			case err = <-gone:
				return true
			default:
				return h.onWire.Load() > 1
			}
		})
		require.Equal(t, int64(1), h.onWire.Load(), "nothing sent but the first call")
		require.ErrorIs(t, err, context.Canceled)
		h.release()
		require.NoError(t, <-first)
		require.True(t, p.Idle())
		n, err := rdb.Exists(ctx, prefix+"gone").Result()
		require.NoError(t, err)
		require.Zero(t, n, "the call that left did not run")
	})
}

// endingCtx is a context whose Err turns to Canceled when end is set, with
// no Done channel: the caller does not notice while it waits, only the
// leader's check before its send does.
type endingCtx struct {
	context.Context
	end atomic.Bool
}

func (c *endingCtx) Done() <-chan struct{} { return nil }

func (c *endingCtx) Err() error {
	if c.end.Load() {
		return context.Canceled
	}
	return nil
}

// A call made leader of the next batch after its ctx ended leaves that
// batch: its command is not sent, the others' are, and the pipe goes on.
func TestLeaderWhoseContextEndedSendsTheOthersOnly(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		g := &gate{held: make(chan struct{}), open: make(chan struct{})}
		rdb.AddHook(g)
		p := NewInFlight(rdb, 1)
		first := make(chan error, 1)
		go func() { first <- p.Process(ctx, redis.NewIntCmd(ctx, "incr", prefix+"first")) }()
		<-g.held
		ending := &endingCtx{Context: ctx}
		left := make(chan error, 1)
		go func() { left <- p.Process(ending, redis.NewIntCmd(ending, "incr", prefix+"left")) }()
		testwait.Until(t, 10*time.Second, "the leader-to-be queued", func() bool { return p.Queued() == 1 })
		others := make(chan error, 2)
		for i := range 2 {
			go func() { others <- p.Process(ctx, redis.NewIntCmd(ctx, "incr", fmt.Sprintf("%sother%d", prefix, i))) }()
		}
		testwait.Until(t, 10*time.Second, "all queued", func() bool { return p.Queued() == 3 })
		ending.end.Store(true)
		close(g.open)
		require.NoError(t, <-first)
		require.ErrorIs(t, <-left, context.Canceled)
		require.NoError(t, <-others)
		require.NoError(t, <-others)
		require.ErrorIs(t, rdb.Get(ctx, prefix+"left").Err(), redis.Nil, "the leader's command was not sent")
		for i := range 2 {
			n, err := rdb.Get(ctx, fmt.Sprintf("%sother%d", prefix, i)).Int()
			require.NoError(t, err)
			require.Equal(t, 1, n)
		}
		require.True(t, p.Idle())
	})
}

// Closing the client while sends are on the wire and calls queued answers
// every call with an error and leaves the pipe idle (it owns no goroutine
// to stop; goleak checks the test).
func TestClientClosedWhileInFlight(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		h, p := heldPipe(t, rdb, 2)
		const calls = 6
		errs := make(chan error, calls)
		for i := range calls {
			go func() { errs <- p.Process(ctx, redis.NewIntCmd(ctx, "incr", fmt.Sprintf("%sk%d", prefix, i))) }()
		}
		testwait.Until(t, 10*time.Second, "two sends on the wire, the rest queued", func() bool {
			return h.onWire.Load() == 2 && h.cmdsOnWire.Load()+int64(p.Queued()) == calls
		})
		require.NoError(t, rdb.Close())
		h.release()
		for range calls {
			require.ErrorIs(t, <-errs, redis.ErrClosed)
		}
		require.True(t, p.Idle())
	})
}

// New gathers and bounds the sends on the wire by the client's pool size
// (per node on a Cluster, go-redis' default when the options leave it
// unset); NewQueued never gathers.
func TestNewBoundIsThePoolSize(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", PoolSize: 3})
	defer c.Close()
	require.Equal(t, 3, New(c).limit)
	d := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer d.Close()
	require.Equal(t, 10*runtime.GOMAXPROCS(0), New(d).limit, "go-redis' default pool size")
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, PoolSize: 5})
	defer cc.Close()
	require.Equal(t, 5, New(cc).limit)
	r := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, PoolSize: 7})
	defer r.Close()
	require.Equal(t, 7, New(r).limit)
	require.Equal(t, 1, NewInFlight(c, 0).limit, "n < 1 means stop-and-wait")
	require.Equal(t, DirectSends, New(c).j.gatherFrom, "New gathers from DirectSends sends on")
	require.Zero(t, NewQueued(c, 2).j.gatherFrom, "a queued pipe never gathers")
}

// New's calls go out plain, without yielding, while fewer than
// DirectSends are on the wire; the next one gathers.
func TestNewGathersFromDirectSendsOn(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, rdb redis.UniversalClient, prefix string) {
		ctx := context.Background()
		h := newHoldAll(t)
		rdb.AddHook(h)
		p := New(rdb)
		var yields atomic.Int64
		setYield(p, func() { yields.Add(1) })
		errs := make(chan error, DirectSends+1)
		for i := range DirectSends + 1 {
			go func() { errs <- p.Process(ctx, redis.NewIntCmd(ctx, "incr", fmt.Sprintf("%sk%d", prefix, i))) }()
			testwait.Until(t, 10*time.Second, "the send on the wire", func() bool { return h.onWire.Load() == int64(i+1) })
			if i < DirectSends {
				require.Zero(t, yields.Load(), "fewer than DirectSends on the wire: no yield")
			}
		}
		require.Equal(t, int64(1), yields.Load(), "the call made while DirectSends were on the wire gathered")
		h.release()
		for range DirectSends + 1 {
			require.NoError(t, <-errs)
		}
		require.True(t, p.Idle())
	})
}
