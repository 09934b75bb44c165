package autopipe

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"time"
)

// Joiner joins the calls of concurrent callers into batches, with up to a
// bound of sends in flight at once. A call made while nothing is in flight
// is sent at once on its own (One). Calls made while the bound is reached
// wait; when a send ends, the calls queued meanwhile are sent together
// (Many): a caller that finished a send hands the next batch to the first
// call queued, so no caller sends more than one batch (a call made while a
// batch is being gathered joins it instead, whatever is in flight: the
// batch's sender holds its place). Between the two, with some sends in
// flight and room for more, a call is sent at once on its own, or, once
// enough are in flight for gathering (SetGather), it opens a batch: it
// yields its processor
// once (runtime.Gosched), so that the calls made meanwhile (typically those
// of the callers the last answers woke, runnable on the same processor) join
// it, and sends what joined, without waiting for any answer. It starts no
// goroutine. Pipe is a Joiner of Redis commands; the Redis ledger joins the
// ends of concurrent runs into one script call.
//
// C is a call's request and, once sent, its answer (a pointer: One, Many
// and Fail record the answer in it).
type Joiner[C any] struct {
	// One sends a lone call under its caller's ctx.
	One func(ctx context.Context, c C)
	// Many sends several calls together. ctx carries the values of the
	// sender's, none of its cancellation, and the latest deadline among
	// the calls (none when one has none).
	Many func(ctx context.Context, batch []C)
	// Fail answers a call that is not sent: its caller's ctx ended
	// (ctx's error), or the sender of its batch panicked.
	Fail func(c C, err error)

	limit      int
	gatherFrom int // a call made while this many sends or more are in flight gathers; < 1: never
	mu         sync.Mutex
	inFlight   int // sends in flight, being gathered, or whose leader is being handed over
	queue      []*joinCall[C]
	// While a call gathers a batch (gathering), the calls made meanwhile
	// join it (gathered) rather than open sends of their own.
	gathering bool
	gathered  []*joinCall[C]
	yield     func() // runtime.Gosched when nil (tests set it)
}

type joinCall[C any] struct {
	ctx   context.Context
	c     C
	done  chan struct{}  // closed when c has its answer, or to make the call lead
	batch []*joinCall[C] // set before done is closed: the batch this call sends
}

// SetInFlight sets the bound of sends in flight at once; n < 1 means 1
// (stop-and-wait). Call it before the first Do.
func (j *Joiner[C]) SetInFlight(n int) { j.limit = max(n, 1) }

// SetGather makes a call made while from or more sends are in flight (and
// fewer than the bound) gather a batch (see Joiner); below from, a call
// is sent at once on its own. from < 1 turns gathering off (the default).
// Call it before the first Do.
func (j *Joiner[C]) SetGather(from int) { j.gatherFrom = from }

// Do sends c, joined with the calls of concurrent callers, and returns when
// c has its answer. A call whose ctx ends while it waits for a send ahead of
// it, or while the batch it made or joined is being gathered, leaves (Fail
// with ctx's error; it is not sent); once its batch is gathered, it is sent
// and waits for the answer. A ctx that already ended sends nothing. A panic
// in One or Many reaches the caller that sent the batch; the other calls of
// the batch are failed, and the Joiner goes on.
func (j *Joiner[C]) Do(ctx context.Context, c C) {
	if err := ctx.Err(); err != nil {
		j.Fail(c, err)
		return
	}
	j.mu.Lock()
	if j.gathering {
		jc := &joinCall[C]{ctx: ctx, c: c, done: make(chan struct{})}
		j.gathered = append(j.gathered, jc)
		j.mu.Unlock()
		j.wait(ctx, jc)
		return
	}
	if j.inFlight < max(j.limit, 1) {
		j.inFlight++
		if j.gatherFrom < 1 || j.inFlight <= j.gatherFrom {
			// Fewer than gatherFrom in flight before it, or not
			// gathering: at once, on its own, allocating nothing here.
			j.mu.Unlock()
			defer j.handOver()
			j.One(ctx, c)
			return
		}
		j.gathering = true
		j.mu.Unlock()
		if j.yield != nil {
			j.yield()
		} else {
			runtime.Gosched()
		}
		j.mu.Lock()
		others := j.gathered
		j.gathering, j.gathered = false, nil
		j.mu.Unlock()
		if len(others) == 0 {
			defer j.handOver()
			if err := ctx.Err(); err != nil {
				// Ended while it gathered: it leaves, as a queued call
				// made leader after its ctx ended does (lead).
				j.Fail(c, err)
				return
			}
			j.One(ctx, c)
			return
		}
		jc := &joinCall[C]{ctx: ctx, c: c}
		jc.batch = append([]*joinCall[C]{jc}, others...)
		j.lead(jc)
		return
	}
	jc := &joinCall[C]{ctx: ctx, c: c, done: make(chan struct{})}
	j.queue = append(j.queue, jc)
	j.mu.Unlock()
	j.wait(ctx, jc)
}

// wait waits for jc, queued or gathered, to be answered, or to be made
// the leader of a batch, which it then sends. A call whose ctx ends before
// it is in a batch leaves (Fail with ctx's error).
func (j *Joiner[C]) wait(ctx context.Context, jc *joinCall[C]) {
	select {
	case <-jc.done:
	case <-ctx.Done():
		if j.abandon(jc) {
			j.Fail(jc.c, ctx.Err())
			return
		}
		<-jc.done // sent, or made leader: see below
	}
	if jc.batch != nil {
		j.lead(jc)
	}
}

// abandon takes jc, whose caller's ctx ended, out of the queue or the
// batch being gathered. It reports false when jc is in a batch already
// (its own, as leader, or another's).
func (j *Joiner[C]) abandon(jc *joinCall[C]) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if i := slices.Index(j.queue, jc); i >= 0 {
		j.queue = slices.Delete(j.queue, i, i+1)
		return true
	}
	if i := slices.Index(j.gathered, jc); i >= 0 {
		j.gathered = slices.Delete(j.gathered, i, i+1)
		return true
	}
	return false
}

// lead sends jc's batch, answers the other calls and hands over. A leader
// whose ctx ended before the send leaves its batch, as a queued call
// leaves the queue; the others are sent.
func (j *Joiner[C]) lead(jc *joinCall[C]) {
	batch := jc.batch
	if err := jc.ctx.Err(); err != nil {
		j.Fail(jc.c, err)
		batch = slices.DeleteFunc(batch, func(b *joinCall[C]) bool { return b == jc })
	}
	sent := false
	defer func() {
		if !sent {
			// One or Many panicked: answer the others, keep the
			// Joiner going, and let the panic reach this caller.
			for _, b := range batch {
				if b != jc {
					j.Fail(b.c, errPanicked)
					close(b.done)
				}
			}
			j.handOver()
		}
	}()
	if len(batch) > 0 {
		j.send(jc.ctx, batch)
	}
	sent = true
	for _, b := range batch {
		if b != jc {
			close(b.done)
		}
	}
	j.handOver()
}

var errPanicked = errors.New("autopipe: the batch's sender panicked")

// handOver, after a send ended, gives everything queued meanwhile to the
// first call queued, as the batch it sends, or frees the send's place.
func (j *Joiner[C]) handOver() {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.queue) == 0 {
		j.inFlight--
		return
	}
	next := j.queue[0]
	next.batch = j.queue
	j.queue = nil
	close(next.done) // the place stays taken: next sends its batch
}

// send runs batch: a lone call with One under its caller's ctx; several
// with Many, without the sender's cancellation (ctx gives its values
// only) but with the latest deadline among the calls (none when one has
// none).
func (j *Joiner[C]) send(ctx context.Context, batch []*joinCall[C]) {
	if len(batch) == 1 {
		j.One(batch[0].ctx, batch[0].c)
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
	cs := make([]C, len(batch))
	for i, b := range batch {
		cs[i] = b.c
	}
	j.Many(ctx, cs)
}

// Gathered returns how many calls joined the batch being gathered (for
// tests).
func (j *Joiner[C]) Gathered() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.gathered)
}

// Queued returns how many calls wait for a place (for tests).
func (j *Joiner[C]) Queued() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.queue)
}

// InFlight returns how many sends are in flight (for tests).
func (j *Joiner[C]) InFlight() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.inFlight
}

// Idle reports that nothing is in flight and nothing waits (for tests).
func (j *Joiner[C]) Idle() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.inFlight == 0 && len(j.queue) == 0 && len(j.gathered) == 0
}
