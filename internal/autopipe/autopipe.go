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

// Pipe sends the commands of concurrent calls together: a call made while
// another batch is on the wire waits for it and then goes out with every
// call queued meanwhile, in one pipeline (one round trip). A lone call goes
// out at once as a plain command, so a caller used from one goroutine pays
// nothing; sixteen goroutines share their round trips. Leadership moves
// from call to call: the caller that sent a batch hands the next one to the
// first call queued behind it, so no caller sends more than one batch. It
// starts no goroutine.
type Pipe struct {
	rdb   redis.UniversalClient
	plain bool // a Cluster: every command on its own

	mu    sync.Mutex
	busy  bool // a batch is on the wire, or its leader is handing over
	queue []*call
}

type call struct {
	ctx  context.Context
	cmd  redis.Cmder
	done chan struct{} // closed when cmd has its answer, or to make the call lead
	lead bool          // set before done is closed: send the queue
}

// New returns a Pipe over rdb. On a Cluster (*redis.ClusterClient) it sends
// every command on its own: go-redis re-sends a node's whole batch when its
// first command meets TRYAGAIN or CLUSTERDOWN, which would run commands
// already answered a second time.
func New(rdb redis.UniversalClient) *Pipe {
	_, cluster := rdb.(*redis.ClusterClient)
	return &Pipe{rdb: rdb, plain: cluster}
}

// Process runs cmd, batched with the commands of concurrent calls, and
// returns cmd's error. A call whose ctx ends while it waits for a batch
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
	if !p.busy {
		// Alone: at once, as a plain command, allocating nothing here.
		p.busy = true
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
		<-c.done // on the wire: its answer comes with the batch's
	}
	if !c.lead {
		return cmd.Err()
	}
	p.lead(c)
	return cmd.Err()
}

// abandon takes c, whose caller's ctx ended, out of the queue. It reports
// false when a leader already took c into a batch. When c had just been
// made leader, it passes leadership on.
func (p *Pipe) abandon(c *call) bool {
	p.mu.Lock()
	i := slices.Index(p.queue, c)
	if i < 0 {
		p.mu.Unlock()
		return false
	}
	p.queue = slices.Delete(p.queue, i, i+1)
	promoted := c.lead
	p.mu.Unlock()
	if promoted {
		p.handOver()
	}
	return true
}

// lead sends everything queued (c among them) as the next batch, answers
// the other calls and hands over.
func (p *Pipe) lead(c *call) {
	p.mu.Lock()
	batch := p.queue
	p.queue = nil
	p.mu.Unlock()
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
	p.send(c.ctx, batch)
	sent = true
	for _, b := range batch {
		if b != c {
			close(b.done)
		}
	}
	p.handOver()
}

var errPanicked = errors.New("autopipe: the batch's sender panicked")

// handOver, after a batch was sent, makes the first call queued meanwhile
// the leader of the next one, or marks the pipe idle.
func (p *Pipe) handOver() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) == 0 {
		p.busy = false
		return
	}
	next := p.queue[0]
	next.lead = true
	close(next.done) // busy stays true: next sends the queue
}

// send runs batch: a lone command as a plain one under its caller's ctx;
// several in one pipeline, without the sender's cancellation but with the
// latest deadline among the calls (none when one has none).
func (p *Pipe) send(ctx context.Context, batch []*call) {
	if len(batch) == 1 {
		_ = p.rdb.Process(ctx, batch[0].cmd)
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

// Queued returns how many calls wait for the batch on the wire (for tests).
func (p *Pipe) Queued() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}

// Idle reports that no batch is on the wire and none waits (for tests).
func (p *Pipe) Idle() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.busy && len(p.queue) == 0
}
