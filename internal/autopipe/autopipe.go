// Package autopipe batches the Redis commands of concurrent calls into
// pipelines: the auto-pipelining of the lease client and the Redis ledger.
package autopipe

import (
	"context"

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
type Pipe struct {
	rdb   redis.UniversalClient
	plain bool // a Cluster: every command on its own
	j     Joiner[redis.Cmder]
}

// DefaultInFlight is the bound New takes: sends (a plain command or a
// pipeline) on the wire at once, per Pipe. Measured with bench's
// leasebench at 16 and 64 goroutines, idle and beside two busy loops.
const DefaultInFlight = 4

// New returns a Pipe over rdb with DefaultInFlight. On a Cluster
// (*redis.ClusterClient) it sends every command on its own: go-redis
// re-sends a node's whole batch when its first command meets TRYAGAIN or
// CLUSTERDOWN, which would run commands already answered a second time.
func New(rdb redis.UniversalClient) *Pipe { return NewInFlight(rdb, DefaultInFlight) }

// NewInFlight is New with at most n sends on the wire at once; n < 1
// means 1 (stop-and-wait: one send on the wire, the next batch waits for
// its answer).
func NewInFlight(rdb redis.UniversalClient, n int) *Pipe {
	_, cluster := rdb.(*redis.ClusterClient)
	p := &Pipe{rdb: rdb, plain: cluster}
	p.j = Joiner[redis.Cmder]{
		One: func(ctx context.Context, cmd redis.Cmder) { _ = rdb.Process(ctx, cmd) },
		Many: func(ctx context.Context, cmds []redis.Cmder) {
			pipe := rdb.Pipeline()
			for _, cmd := range cmds {
				_ = pipe.Process(ctx, cmd)
			}
			_, _ = pipe.Exec(ctx) // each command carries its own answer
		},
		Fail: func(cmd redis.Cmder, err error) { cmd.SetErr(err) },
	}
	p.j.SetInFlight(n)
	return p
}

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
	if p.plain {
		if err := ctx.Err(); err != nil {
			cmd.SetErr(err)
			return err
		}
		return p.rdb.Process(ctx, cmd)
	}
	p.j.Do(ctx, cmd)
	return cmd.Err()
}

// Queued returns how many calls wait for a place on the wire (for tests).
func (p *Pipe) Queued() int { return p.j.Queued() }

// InFlight returns how many sends are on the wire (for tests).
func (p *Pipe) InFlight() int { return p.j.InFlight() }

// Idle reports that nothing is on the wire and nothing waits (for tests).
func (p *Pipe) Idle() bool { return p.j.Idle() }
