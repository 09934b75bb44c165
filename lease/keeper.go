package lease

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// keeper renews every lease of one Client in batches: one pipeline of
// renew scripts per Options.BatchSize leases, one round trip each (one per
// Cluster node).
//
// It runs no goroutine of its own. One timer, armed for the earliest
// renewal due, runs each renewal pass on the goroutine the runtime starts
// for it; the pass re-arms the timer for the next one. Acquiring and
// releasing a lease therefore starts no goroutine and allocates nothing
// here. When the last lease is removed the timer is stopped and remove
// waits for a pass in flight, so no goroutine outlives the Client's leases.
//
// A lease is renewed when its next renewal is due, or up to half an
// interval early when a batch goes out anyway: leases of one TTL acquired
// close together fall into one batch and stay there.
type keeper struct {
	c     *Client
	timer *time.Timer // runs pass; armed while leases are held

	mu      sync.Mutex
	leases  map[*Lease]struct{}
	armedAt time.Time     // when the timer fires; zero when it is not armed
	passing bool          // a pass is renewing
	busy    int           // timer firings scheduled or running, not yet ended
	quiet   chan struct{} // non-nil: closed when busy drops to 0 or a lease is added
}

func newKeeper(c *Client) *keeper {
	k := &keeper{c: c, leases: map[*Lease]struct{}{}}
	k.timer = time.AfterFunc(time.Hour, k.pass)
	k.timer.Stop()
	return k
}

// add starts keeping l alive.
func (k *keeper) add(l *Lease) {
	next, _ := l.renewState()
	k.mu.Lock()
	defer k.mu.Unlock()
	k.leases[l] = struct{}{}
	if k.quiet != nil {
		// A remove waiting for the last pass: the keeper is in use again.
		close(k.quiet)
		k.quiet = nil
	}
	k.armLocked(next)
}

// forget stops keeping l alive without waiting: l has ended.
func (k *keeper) forget(l *Lease) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.forgetLocked(l)
}

func (k *keeper) forgetLocked(l *Lease) {
	delete(k.leases, l)
	if len(k.leases) == 0 && k.timer.Stop() {
		k.armedAt = time.Time{}
		k.endFiringLocked()
	}
}

// remove stops keeping l alive. When l was the last lease it waits for a
// renewal pass in flight, so that no goroutine outlives the Client's
// leases.
func (k *keeper) remove(ctx context.Context, l *Lease) error {
	k.mu.Lock()
	k.forgetLocked(l)
	if len(k.leases) > 0 || k.busy == 0 {
		k.mu.Unlock()
		return nil
	}
	if k.quiet == nil {
		k.quiet = make(chan struct{})
	}
	quiet := k.quiet
	k.mu.Unlock()
	select {
	case <-quiet:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// poke re-arms the timer after a lease's schedule moved earlier (thaw).
func (k *keeper) poke() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.armLocked(k.nextLocked())
}

// armLocked makes the timer fire no later than at (zero: nothing to renew).
func (k *keeper) armLocked(at time.Time) {
	if at.IsZero() || k.passing {
		return // a running pass re-arms when it ends
	}
	if !k.armedAt.IsZero() && !at.Before(k.armedAt) {
		return
	}
	k.armedAt = at
	if !k.timer.Reset(max(time.Until(at), 0)) {
		k.busy++ // a new firing; an active timer was only moved
	}
}

// endFiringLocked accounts for a firing that ended or was stopped.
func (k *keeper) endFiringLocked() {
	k.busy--
	if k.busy == 0 && k.quiet != nil {
		close(k.quiet)
		k.quiet = nil
	}
}

// pass runs on the timer's goroutine: it renews the leases due and re-arms
// the timer for the next renewal.
func (k *keeper) pass() {
	k.mu.Lock()
	defer k.mu.Unlock()
	defer k.endFiringLocked()
	k.armedAt = time.Time{}
	if k.passing {
		return // a stale firing; the running pass re-arms
	}
	batch := k.dueLocked(time.Now())
	if len(batch) > 0 {
		k.passing = true
		k.mu.Unlock()
		k.renew(batch)
		k.mu.Lock()
		k.passing = false
	}
	k.armLocked(k.nextLocked())
}

// nextLocked drops ended leases and returns when the next one falls due
// (zero when none is held).
func (k *keeper) nextLocked() (next time.Time) {
	for l := range k.leases {
		nextRenew, ended := l.renewState()
		if ended {
			delete(k.leases, l)
		} else if next.IsZero() || nextRenew.Before(next) {
			next = nextRenew
		}
	}
	return next
}

// dueLocked drops ended leases and returns those to renew now.
func (k *keeper) dueLocked(now time.Time) (batch []*Lease) {
	for l := range k.leases {
		nextRenew, ended := l.renewState()
		if ended {
			delete(k.leases, l)
			continue
		}
		if !nextRenew.After(now) {
			batch = append(batch, l)
		}
	}
	if len(batch) == 0 {
		return nil
	}
	// A batch goes out: take along the leases due within half an interval.
	for l := range k.leases {
		nextRenew, _ := l.renewState()
		if nextRenew.After(now) && !nextRenew.After(now.Add(RenewInterval(l.ttl)/2)) {
			batch = append(batch, l)
		}
	}
	return batch
}

// renew renews batch, BatchSize leases per round trip.
func (k *keeper) renew(batch []*Lease) {
	size := k.c.opts.BatchSize
	for len(batch) > 0 {
		n := min(size, len(batch))
		k.renewChunk(batch[:n])
		batch = batch[n:]
	}
}

func (k *keeper) renewChunk(chunk []*Lease) {
	// Bounded by the earliest trust window in the chunk: past it, the
	// answer cannot save that lease anyway, and a hung Redis must not hold
	// the others.
	deadline := chunk[0].Deadline()
	for _, l := range chunk[1:] {
		if d := l.Deadline(); d.Before(deadline) {
			deadline = d
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	batch := make([]Held, len(chunk))
	for i, l := range chunk {
		batch[i] = Held{Name: l.name, Owner: l.owner, TTL: l.ttl}
	}
	start := time.Now()
	errs := k.c.b.Renew(ctx, batch)
	took := time.Since(start)
	failed := 0
	for i, l := range chunk {
		err := errs[i]
		k.c.opts.Observer.ObserveRenew(l.name, err, took)
		switch {
		case err == nil:
			l.renewed(start)
		case errors.Is(err, ErrNotHeld):
			l.end(ErrNotHeld)
		default:
			failed++
			l.renewFailed(err)
		}
	}
	k.c.log.LogAttrs(ctx, slog.LevelDebug, "lease_renewed",
		slog.Int("leases", len(chunk)), slog.Int("failed", failed), slog.Duration("took", took))
}
