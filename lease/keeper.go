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
// Cluster node). Its goroutine runs while the Client holds leases and exits
// when the last one is released.
//
// A lease is renewed when its next renewal is due, or up to half an
// interval early when a batch goes out anyway: leases of one TTL acquired
// close together fall into one batch and stay there.
type keeper struct {
	c *Client

	mu      sync.Mutex
	leases  map[*Lease]struct{}
	running bool
	wake    chan struct{} // buffered 1: a lease was added or ended
	stop    chan struct{} // closed to stop the current goroutine
	done    chan struct{} // closed when the current goroutine returns
}

func newKeeper(c *Client) *keeper {
	return &keeper{c: c, leases: map[*Lease]struct{}{}, wake: make(chan struct{}, 1)}
}

// add starts keeping l alive.
func (k *keeper) add(l *Lease) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.leases[l] = struct{}{}
	if !k.running {
		k.running = true
		k.stop, k.done = make(chan struct{}), make(chan struct{})
		go k.run(k.stop, k.done)
	}
	k.poke()
}

// remove stops keeping l alive. When l was the last lease it waits for the
// goroutine to return, so that no goroutine outlives the Client's leases.
func (k *keeper) remove(ctx context.Context, l *Lease) error {
	k.mu.Lock()
	delete(k.leases, l)
	if len(k.leases) > 0 || !k.running {
		k.mu.Unlock()
		return nil
	}
	k.running = false
	close(k.stop)
	done := k.done
	k.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (k *keeper) poke() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

func (k *keeper) run(stop, done chan struct{}) {
	defer close(done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		batch, next := k.due(time.Now())
		if len(batch) > 0 {
			k.renew(batch)
			continue
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = time.Until(next)
		}
		timer.Reset(wait)
		select {
		case <-stop:
			return
		case <-k.wake:
		case <-timer.C:
		}
	}
}

// due drops ended leases and returns those to renew now, and the time the
// next one falls due.
func (k *keeper) due(now time.Time) (batch []*Lease, next time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for l := range k.leases {
		nextRenew, ended := l.renewState()
		if ended {
			delete(k.leases, l)
			continue
		}
		if !nextRenew.After(now) {
			batch = append(batch, l)
		} else if next.IsZero() || nextRenew.Before(next) {
			next = nextRenew
		}
	}
	if len(batch) == 0 {
		return nil, next
	}
	// A batch goes out: take along the leases due within half an interval.
	for l := range k.leases {
		nextRenew, _ := l.renewState()
		if nextRenew.After(now) && !nextRenew.After(now.Add(RenewInterval(l.ttl)/2)) {
			batch = append(batch, l)
		}
	}
	return batch, next
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
