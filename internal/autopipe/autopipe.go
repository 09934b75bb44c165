// Package autopipe batches the Redis commands of concurrent calls into
// pipelines: the auto-pipelining of the lease client and the Redis ledger.
package autopipe

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

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
	limit int  // sends on the wire at once

	mu       sync.Mutex
	inFlight int // sends on the wire, or whose leader is being handed over
	queue    []*call
}

type call struct {
	ctx   context.Context
	cmd   redis.Cmder
	done  chan struct{} // closed when cmd has its answer, or to make the call lead
	batch []*call       // set before done is closed: the batch this call sends
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
	return &Pipe{rdb: rdb, plain: cluster, limit: max(n, 1)}
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
	if err := ctx.Err(); err != nil {
		cmd.SetErr(err)
		return err
	}
	if p.plain {
		return p.rdb.Process(ctx, cmd)
	}
	p.mu.Lock()
	if p.inFlight < p.limit {
		// Room on the wire: at once, as a plain command, allocating
		// nothing here.
		p.inFlight++
		p.mu.Unlock()
		defer p.handOver()
		_ = p.rdb.Process(ctx, cmd)
		return cmd.Err()
	}
	c := &call{ctx: ctx, cmd: cmd, done: make(chan struct{})}
	p.queue = append(p.queue, c)
	p.mu.Unlock()
	select {
	case <-c.done:
	case <-ctx.Done():
		if p.abandon(c) {
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
		<-c.done // on the wire, or made leader: see below
	}
	if c.batch != nil {
		p.lead(c)
	}
	return cmd.Err()
}

// abandon takes c, whose caller's ctx ended, out of the queue. It reports
// false when c is in a batch already (its own, as leader, or another's).
func (p *Pipe) abandon(c *call) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.Index(p.queue, c)
	if i < 0 {
		return false
	}
	p.queue = slices.Delete(p.queue, i, i+1)
	return true
}

// lead sends c's batch, answers the other calls and hands over. A leader
// whose ctx ended before the send leaves its batch, as a queued call
// leaves the queue; the others are sent.
func (p *Pipe) lead(c *call) {
	batch := c.batch
	if err := c.ctx.Err(); err != nil {
		c.cmd.SetErr(err)
		batch = slices.DeleteFunc(batch, func(b *call) bool { return b == c })
	}
	sent := false
	defer func() {
		if !sent {
			// go-redis or a hook panicked: answer the others, keep the
			// pipe going, and let the panic reach this caller.
			for _, b := range batch {
				if b != c {
					b.cmd.SetErr(errPanicked)
					close(b.done)
				}
			}
			p.handOver()
		}
	}()
	if len(batch) > 0 {
		p.send(c.ctx, batch)
	}
	sent = true
	for _, b := range batch {
		if b != c {
			close(b.done)
		}
	}
	p.handOver()
}

var errPanicked = errors.New("autopipe: the batch's sender panicked")

// handOver, after a send ended, gives everything queued meanwhile to the
// first call queued, as the batch it sends, or frees the send's place on
// the wire.
func (p *Pipe) handOver() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) == 0 {
		p.inFlight--
		return
	}
	next := p.queue[0]
	next.batch = p.queue
	p.queue = nil
	close(next.done) // the place stays taken: next sends its batch
}

// send runs batch: a lone command as a plain one under its caller's ctx;
// several in one pipeline, without the sender's cancellation (ctx gives
// its values only) but with the latest deadline among the calls (none
// when one has none).
func (p *Pipe) send(ctx context.Context, batch []*call) {
	if len(batch) == 1 {
		_ = p.rdb.Process(batch[0].ctx, batch[0].cmd)
		return
	}
	ctx = context.WithoutCancel(ctx)
	var latest time.Time
	for _, b := range batch {
		d, ok := b.ctx.Deadline()
		if !ok {
			latest = time.Time{}
			break
		}
		if d.After(latest) {
			latest = d
		}
	}
	if !latest.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, latest)
		defer cancel()
	}
	pipe := p.rdb.Pipeline()
	for _, b := range batch {
		_ = pipe.Process(ctx, b.cmd)
	}
	_, _ = pipe.Exec(ctx) // each command carries its own answer
}

// Queued returns how many calls wait for a place on the wire (for tests).
func (p *Pipe) Queued() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}

// InFlight returns how many sends are on the wire (for tests).
func (p *Pipe) InFlight() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inFlight
}

// Idle reports that nothing is on the wire and nothing waits (for tests).
func (p *Pipe) Idle() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inFlight == 0 && len(p.queue) == 0
}
