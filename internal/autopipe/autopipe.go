// Package autopipe batches the Redis commands of concurrent calls into
// pipelines: the auto-pipelining of the lease client and the Redis ledger.
package autopipe

import (
	"context"
	"runtime"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Pipe sends the commands of concurrent calls, batched, up to a bound of
// sends (a plain command or a pipeline, one connection each) on the wire
// at once: by default the client's pool size, so that no call waits for
// another's answer while a connection is free. The bound is the Pipe's
// own: the lease client, redisfence and httpfence's Redis stores each
// have one, and share the client's pool with each other and with the
// application's commands; a send that finds no free connection waits for
// one in go-redis, as a plain command does (Options.PoolTimeout).
//
//   - A call made while fewer than DirectSends (4) are on the wire goes out
//     at once as a plain command: a caller used from one goroutine, or a
//     few, pays nothing.
//   - A call made while DirectSends or more are on the wire, with room for
//     more, gathers a batch: it yields its processor once (runtime.Gosched),
//     so that the calls made meanwhile join it, and sends them together in
//     one pipeline, at once, without waiting for any answer. The calls that
//     join are typically those of the callers the last answers woke,
//     runnable on the same processor: their next calls go out together,
//     in one write and one read on each side rather than one per call.
//   - A call made while the bound is reached (and no batch is being
//     gathered, which it would join) waits; when a send ends, the calls
//     queued meanwhile go out together in one pipeline (a caller that
//     finished a send hands the next batch to the first call queued, so no
//     caller sends more than one batch).
//
// The batching saves the server's CPU and the client's (one write and one
// read for many commands, where go-redis also pays a pool check and, with
// RESP3, a read for push notifications per send); gathering without waiting
// for answers keeps it from costing a round trip where the round trip, not
// the CPU, is the bottleneck. The one yield may let other runnable
// goroutines of the process run first, hence DirectSends. It starts no
// goroutine.
//
// On a Cluster (*redis.ClusterClient) the calls are joined per master: a
// script call (EVAL, EVALSHA) is joined with the calls whose first key
// lives on the same master, with a bound of its own per master, so a
// master that hangs holds up the calls to it only, as plain commands
// would. Every command of a batch is marked NoRetry: go-redis then never
// sends a batch again (it would on TRYAGAIN, CLUSTERDOWN or a network
// error, running commands already answered a second time); a MOVED or
// ASK reply is still followed for that command alone, which did not run.
// A TRYAGAIN or CLUSTERDOWN reply in a batch reaches its caller as the
// command's error, as any Redis error does. Other commands go out plain.
type Pipe struct {
	rdb        redis.UniversalClient
	cluster    *redis.ClusterClient // nil off Cluster
	limit      int
	gatherFrom int
	j          Joiner[redis.Cmder] // off Cluster
	yield      func()              // the Joiners' yield (tests set it before the first call)

	mu      sync.Mutex
	masters map[*redis.Client]*Joiner[redis.Cmder] // on Cluster: one per master
}

// New returns a Pipe over rdb whose bound of sends on the wire is rdb's
// connection pool size (per master on a Cluster; go-redis' default, 10
// per GOMAXPROCS, for a client whose options it cannot read).
func New(rdb redis.UniversalClient) *Pipe { return NewInFlight(rdb, poolSize(rdb)) }

// NewInFlight is New with at most n sends on the wire at once; n < 1
// means 1 (stop-and-wait: one send on the wire, the next batch waits for
// its answer).
func NewInFlight(rdb redis.UniversalClient, n int) *Pipe { return newPipe(rdb, n, DirectSends) }

// DirectSends is how many sends a Pipe of New or NewInFlight lets go out
// on the wire, each call on its own, before a call gathers a batch. Below
// it a call never yields: at 4 goroutines acquiring and releasing,
// gathering from the second send measured 0.66 of the hand-written ideal
// against 0.85 for plain sends, and in a process whose other goroutines
// keep both processors busy the yields put calls behind them (acquire and
// release at 2 and 4 goroutines beside 2 CPU-bound ones: about 0.6 of the
// calls, up to twice the p99).
// From 4 on, gathering measured 1.05 to 1.11 at 16 goroutines (plain
// sends, the rest queued: 0.88 to 0.98) and 1.83 at 64 (1.61).
const DirectSends = 4

// QueuedInFlight is the bound of sends on the wire that the scheduler's
// Redis ledger gives its Pipe (NewQueued; not a queue length), measured
// with bench's schedbench.
const QueuedInFlight = 4

// NewQueued returns a Pipe that never gathers: up to n sends on the wire
// at once, each call made while fewer are goes out at once on its own, and
// the calls made while n are queue for the next send to end. For callers
// whose calls come in bursts of hundreds and whose server's CPU, not the
// round trip, is the bottleneck (the scheduler's Redis ledger at a slot):
// there, fewer and bigger batches win, measured with bench's schedbench
// (at 1,000 slots due at once, lag p99 33 to 44 ms queued, 41 to 58
// gathering, on a 2-core host).
func NewQueued(rdb redis.UniversalClient, n int) *Pipe { return newPipe(rdb, n, 0) }

// newPipe returns a Pipe of at most n sends on the wire whose calls gather
// from gatherFrom sends on (never when < 1).
func newPipe(rdb redis.UniversalClient, n, gatherFrom int) *Pipe {
	p := &Pipe{rdb: rdb, limit: max(n, 1), gatherFrom: gatherFrom}
	if c, ok := rdb.(*redis.ClusterClient); ok {
		p.cluster = c
		p.masters = map[*redis.Client]*Joiner[redis.Cmder]{}
		return p
	}
	p.setUp(&p.j, false)
	return p
}

// poolSize is rdb's connection pool size, per node on a Cluster.
func poolSize(rdb redis.UniversalClient) int {
	n := 0
	switch c := rdb.(type) {
	case *redis.Client:
		n = c.Options().PoolSize
	case *redis.ClusterClient:
		n = c.Options().PoolSize
	case *redis.Ring:
		n = c.Options().PoolSize
	}
	if n < 1 {
		n = 10 * runtime.GOMAXPROCS(0)
	}
	return n
}

// setUp makes j send over p.rdb; noRetry marks every command of a batch
// NoRetry.
func (p *Pipe) setUp(j *Joiner[redis.Cmder], noRetry bool) {
	rdb := p.rdb
	j.One = func(ctx context.Context, cmd redis.Cmder) { _ = rdb.Process(ctx, cmd) }
	j.Many = func(ctx context.Context, cmds []redis.Cmder) {
		pipe := rdb.Pipeline()
		for _, cmd := range cmds {
			if noRetry {
				cmd = noRetryCmd{cmd}
			}
			_ = pipe.Process(ctx, cmd)
		}
		_, _ = pipe.Exec(ctx) // each command carries its own answer
	}
	j.Fail = func(cmd redis.Cmder, err error) { cmd.SetErr(err) }
	j.SetInFlight(p.limit)
	j.SetGather(p.gatherFrom)
	j.yield = p.yield
}

// noRetryCmd is a command go-redis must not send again as part of a
// pipeline (redis.Cmder's NoRetry).
type noRetryCmd struct{ redis.Cmder }

func (noRetryCmd) NoRetry() bool { return true }

// Process runs cmd, batched with the commands of concurrent calls, and
// returns cmd's error. A call whose ctx ends while it waits for a send ahead
// of it, or while its batch is being gathered, leaves (its command is not
// sent) and returns ctx's error; once its batch is gathered it is sent, and
// it waits for the answer. A batch of several is sent without its sender's
// cancellation (it carries other calls' commands) but with the latest
// deadline among its calls (none if one has none), so with go-redis'
// ContextTimeoutEnabled no call waits on a hung server past the deadlines of
// its batch. A ctx that already ended sends nothing. A panic in go-redis or
// a hook reaches the caller that sent the batch; the other calls of the
// batch get an error, and the pipe goes on.
func (p *Pipe) Process(ctx context.Context, cmd redis.Cmder) error {
	j := &p.j
	if p.cluster != nil {
		if j = p.master(ctx, cmd); j == nil {
			if err := ctx.Err(); err != nil {
				cmd.SetErr(err)
				return err
			}
			return p.rdb.Process(ctx, cmd)
		}
	}
	j.Do(ctx, cmd)
	return cmd.Err()
}

// master returns the Joiner of the Cluster master that holds cmd's first
// key, nil when cmd is not a script call with a key or the master is not
// known (go-redis then routes it, or reports why it cannot).
func (p *Pipe) master(ctx context.Context, cmd redis.Cmder) *Joiner[redis.Cmder] {
	key, ok := scriptKey(cmd)
	if !ok {
		return nil
	}
	node, err := p.cluster.MasterForKey(ctx, key)
	if err != nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	j := p.masters[node]
	if j == nil {
		j = new(Joiner[redis.Cmder])
		p.setUp(j, true)
		p.masters[node] = j
	}
	return j
}

// scriptKey returns the first key of an EVAL or EVALSHA command (EVAL
// script numkeys key ...), false for any other command or one without
// keys.
func scriptKey(cmd redis.Cmder) (string, bool) {
	args := cmd.Args()
	if len(args) < 4 {
		return "", false
	}
	name, _ := args[0].(string)
	if !strings.EqualFold(name, "evalsha") && !strings.EqualFold(name, "eval") {
		return "", false
	}
	if n, ok := args[2].(int); ok && n < 1 {
		return "", false
	}
	key, ok := args[3].(string)
	return key, ok
}

// Gathered returns how many calls joined a batch being gathered (for
// tests).
func (p *Pipe) Gathered() int { return p.sum((*Joiner[redis.Cmder]).Gathered) }

// Queued returns how many calls wait for a place on the wire (for tests).
func (p *Pipe) Queued() int { return p.sum((*Joiner[redis.Cmder]).Queued) }

// InFlight returns how many sends are on the wire (for tests).
func (p *Pipe) InFlight() int { return p.sum((*Joiner[redis.Cmder]).InFlight) }

// Idle reports that nothing is on the wire and nothing waits (for tests).
func (p *Pipe) Idle() bool {
	return p.sum(func(j *Joiner[redis.Cmder]) int {
		if j.Idle() {
			return 0
		}
		return 1
	}) == 0
}

// sum adds f over the Joiners of p.
func (p *Pipe) sum(f func(*Joiner[redis.Cmder]) int) int {
	if p.cluster == nil {
		return f(&p.j)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, j := range p.masters {
		n += f(j)
	}
	return n
}
