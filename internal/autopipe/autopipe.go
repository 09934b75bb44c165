// Package autopipe batches the Redis commands of concurrent calls into
// pipelines: the auto-pipelining of the lease client and the Redis ledger.
package autopipe

import (
	"context"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Pipe sends the commands of concurrent calls, up to a bound of them on
// the wire at once (InFlight, one connection each) and batched beyond it:
// a call made while fewer than that many are on the wire goes out at once
// as a plain command, so a caller used from one goroutine pays nothing and
// a few concurrent ones use the connection pool as plain calls would. A
// call made while the bound is reached waits, and when one of the sends
// ends, the calls queued meanwhile go out together in one pipeline (one
// round trip): a caller that finished a send hands the next batch to the
// first call queued, so no caller sends more than one batch. The bound
// keeps several batches in flight when the round trip is the bottleneck,
// and the batching saves Redis' CPU (one read and one write for many
// commands) when the server is. It starts no goroutine.
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
	rdb     redis.UniversalClient
	cluster *redis.ClusterClient // nil off Cluster
	limit   int
	j       Joiner[redis.Cmder] // off Cluster

	mu      sync.Mutex
	masters map[*redis.Client]*Joiner[redis.Cmder] // on Cluster: one per master
}

// DefaultInFlight is the bound New takes: sends (a plain command or a
// pipeline) on the wire at once, per Pipe (on a Cluster, per master).
// Measured with bench's leasebench at 16 and 64 goroutines, idle and
// beside two busy loops.
const DefaultInFlight = 4

// New returns a Pipe over rdb with DefaultInFlight.
func New(rdb redis.UniversalClient) *Pipe { return NewInFlight(rdb, DefaultInFlight) }

// NewInFlight is New with at most n sends on the wire at once; n < 1
// means 1 (stop-and-wait: one send on the wire, the next batch waits for
// its answer).
func NewInFlight(rdb redis.UniversalClient, n int) *Pipe {
	p := &Pipe{rdb: rdb, limit: max(n, 1)}
	if c, ok := rdb.(*redis.ClusterClient); ok {
		p.cluster = c
		p.masters = map[*redis.Client]*Joiner[redis.Cmder]{}
		return p
	}
	p.setUp(&p.j, false)
	return p
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
}

// noRetryCmd is a command go-redis must not send again as part of a
// pipeline (redis.Cmder's NoRetry).
type noRetryCmd struct{ redis.Cmder }

func (noRetryCmd) NoRetry() bool { return true }

// Process runs cmd, batched with the commands of concurrent calls, and
// returns cmd's error. A call whose ctx ends while it waits for a send
// ahead of it leaves the queue (its command is not sent) and returns ctx's
// error; once its command is on the wire it waits for the answer. A batch
// of several is sent without its sender's cancellation (it carries other
// calls' commands) but with the latest deadline among its calls (none if
// one has none), so with go-redis' ContextTimeoutEnabled no call waits on
// a hung server past the deadlines of its batch. A ctx that already ended
// sends nothing. A panic in go-redis or a hook reaches the caller that
// sent the batch; the other calls of the batch get an error, and the pipe
// goes on.
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
