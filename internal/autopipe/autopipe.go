// Package autopipe batches the Redis commands of concurrent calls into
// pipelines: the auto-pipelining of the lease client and the Redis ledger.
package autopipe

import (
	"context"
	"sync"

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
	rdb redis.UniversalClient

	mu    sync.Mutex
	busy  bool // a batch is on the wire, or its leader is handing over
	queue []*call
}

type call struct {
	cmd  redis.Cmder
	done chan struct{} // closed when cmd has its answer, or to make the call lead
	lead bool          // set before done is closed: send the queue
}

// New returns a Pipe over rdb.
func New(rdb redis.UniversalClient) *Pipe { return &Pipe{rdb: rdb} }

// Process runs cmd, batched with the commands of concurrent calls. A
// batch of several is sent without ctx's cancellation (it carries other
// calls' commands); a ctx that already ended sends nothing.
func (p *Pipe) Process(ctx context.Context, cmd redis.Cmder) error {
	if err := ctx.Err(); err != nil {
		cmd.SetErr(err)
		return err
	}
	p.mu.Lock()
	if !p.busy {
		// Alone: at once, as a plain command, allocating nothing here.
		p.busy = true
		p.mu.Unlock()
		_ = p.rdb.Process(ctx, cmd)
		p.handOver()
		return cmd.Err()
	}
	c := &call{cmd: cmd, done: make(chan struct{})}
	p.queue = append(p.queue, c)
	p.mu.Unlock()
	<-c.done
	if !c.lead {
		return cmd.Err()
	}
	p.mu.Lock()
	batch := p.queue // c among them
	p.queue = nil
	p.mu.Unlock()
	p.send(ctx, batch)
	for _, b := range batch {
		if b != c {
			close(b.done)
		}
	}
	p.handOver()
	return cmd.Err()
}

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

// send runs batch: a lone command as a plain one under the caller's ctx;
// several in one pipeline, without the sending caller's cancellation (the
// other commands are not its own).
func (p *Pipe) send(ctx context.Context, batch []*call) {
	if len(batch) == 1 {
		_ = p.rdb.Process(ctx, batch[0].cmd)
		return
	}
	ctx = context.WithoutCancel(ctx)
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
