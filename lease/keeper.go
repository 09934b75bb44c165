package lease

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/internal/logattr"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
)

// keeper renews every lease of one Client in batches: one pipeline of
// renew scripts per Options.BatchSize leases, one round trip each (one per
// Cluster node). It also ends each lease at the end of its trust window.
//
// It runs no goroutine of its own. One timer, armed for the earliest
// renewal due or trust window ending, runs each pass on the goroutine the
// runtime starts for it; the pass re-arms the timer for the next one.
// Acquiring and releasing a lease therefore starts no goroutine and no
// timer of its own, and allocates nothing here. While a pass renews, the
// timer stays armed for the earliest end of a trust window: a firing then
// only ends the leases whose window ended, so a renewal that hangs does not
// hold up the loss signal. When the last lease is removed, remove waits
// for a pass in flight, so no renewal outlives the Client's leases; the
// timer, left armed, fires at most once more and finds nothing to do.
//
// A lease is renewed when its next renewal is due, or up to half an
// interval early when a batch goes out anyway: leases of one TTL acquired
// close together fall into one batch and stay there.
type keeper struct {
	c     *Client
	timer *time.Timer // runs pass; armed while leases are held (see remove)

	mu      sync.Mutex
	leases  map[*Lease]struct{}
	armedAt time.Time     // when the timer fires; zero when it is not armed
	passing bool          // a pass is renewing: firings meanwhile only expire
	running int           // passes running
	quiet   chan struct{} // non-nil: closed when running drops to 0 or a lease is added
}

func newKeeper(c *Client) *keeper {
	k := &keeper{c: c, leases: map[*Lease]struct{}{}}
	k.timer = time.AfterFunc(time.Hour, k.pass)
	k.timer.Stop()
	return k
}

// add starts keeping l alive.
func (k *keeper) add(l *Lease) {
	next, _, _, _ := l.schedule()
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
	delete(k.leases, l)
}

// remove stops keeping l alive. When l was the last lease it waits for a
// pass in flight, so that no renewal outlives the Client's leases.
//
// The timer is left armed: a Client that acquires and releases leases one
// after another would otherwise stop and re-arm it for each, and every
// re-arm wakes an idle thread of the Go scheduler (a futex wake-up and a
// context switch, dearer than the rest of acquire and release together on
// a small machine). Left armed, it fires at most once more with no lease
// to keep, does nothing and stays stopped.
func (k *keeper) remove(ctx context.Context, l *Lease) error {
	k.mu.Lock()
	delete(k.leases, l)
	if len(k.leases) > 0 || k.running == 0 {
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

// armLocked makes the timer fire no later than at (zero: nothing to do).
func (k *keeper) armLocked(at time.Time) {
	if at.IsZero() {
		return
	}
	if !k.armedAt.IsZero() && !at.Before(k.armedAt) {
		return
	}
	k.armedAt = at
	k.timer.Reset(max(time.Until(at), 0))
}

// pass runs on the timer's goroutine: it ends the leases whose trust
// window ended, renews those due (unless a pass is renewing already) and
// re-arms the timer.
func (k *keeper) pass() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.running++
	defer func() {
		k.running--
		if k.running == 0 && k.quiet != nil {
			close(k.quiet)
			k.quiet = nil
		}
	}()
	k.armedAt = time.Time{}
	now := time.Now()
	expired, batch := k.dueLocked(now)
	if len(expired) > 0 || len(batch) > 0 {
		renewing := len(batch) > 0 // then no pass was renewing
		if renewing {
			k.passing = true
			// While this pass renews, fire for the earliest end of a
			// trust window (nextLocked leaves out renewals now): a
			// renewal that hangs must not hold up the loss signal of a
			// lease outside its batch.
			k.armLocked(k.nextLocked())
		}
		k.mu.Unlock()
		for _, l := range expired {
			l.expire(now)
		}
		if renewing {
			k.renew(batch)
		}
		k.mu.Lock()
		if renewing {
			k.passing = false
		}
	}
	k.armLocked(k.nextLocked())
}

// nextLocked drops ended leases and returns when the timer should fire
// next: the earliest renewal due (unless a pass is renewing) or end of a
// trust window; zero when nothing is to be done.
func (k *keeper) nextLocked() (next time.Time) {
	for l := range k.leases {
		nextRenew, deadline, ended, frozen := l.schedule()
		switch {
		case ended:
			delete(k.leases, l)
			continue
		case frozen:
			continue
		}
		at := deadline
		if !k.passing && nextRenew.Before(at) {
			at = nextRenew
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next
}

// dueLocked drops ended leases and returns those whose trust window ended
// by now, and, unless a pass is renewing, those to renew now.
func (k *keeper) dueLocked(now time.Time) (expired, batch []*Lease) {
	for l := range k.leases {
		nextRenew, deadline, ended, frozen := l.schedule()
		switch {
		case ended:
			delete(k.leases, l)
		case frozen:
		case !deadline.After(now):
			expired = append(expired, l)
		case !k.passing && !nextRenew.After(now):
			batch = append(batch, l)
		}
	}
	if len(batch) == 0 {
		return expired, nil
	}
	// A batch goes out: take along the leases due within half an interval.
	for l := range k.leases {
		nextRenew, deadline, ended, frozen := l.schedule()
		if !ended && !frozen && deadline.After(now) &&
			nextRenew.After(now) && !nextRenew.After(now.Add(renewInterval(l.ttl)/2)) {
			batch = append(batch, l)
		}
	}
	return expired, batch
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
	batch := make([]leasedriver.Held, len(chunk))
	for i, l := range chunk {
		batch[i] = l.held()
	}
	start := time.Now()
	errs := k.c.b.Renew(ctx, batch)
	took := time.Since(start)
	// On an evicting Redis (Eviction.AllowEviction), read the eviction
	// counter: now when a lease was found not held (its key may have been
	// evicted: say so in its cause), else at most every
	// evictionPollInterval.
	notHeld := false
	for _, err := range errs {
		notHeld = notHeld || errors.Is(err, ErrNotHeld)
	}
	evictedAt := k.c.watchEvictions(ctx, notHeld)
	failed := 0
	for i, l := range chunk {
		err := errs[i]
		k.c.opts.Observer.ObserveRenew(l.name, err, took)
		if _, _, _, frozen := l.schedule(); frozen {
			// Frozen (leasetest.Freeze) while this renewal was on the
			// wire: a paused process reads the answer only once it runs
			// again, so the frozen lease ignores it; once thawed, it
			// renews (or expires) on its own.
			continue
		}
		switch {
		case err == nil:
			l.renewed(start)
		case errors.Is(err, ErrNotHeld):
			l.end(notHeldCause(evictedAt, l.ttl))
		default:
			failed++
			l.renewFailed(err)
		}
	}
	lost := 0
	var firstErr error
	for _, err := range errs {
		if errors.Is(err, ErrNotHeld) {
			lost++
		} else if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	k.c.traceRenew(ctx, len(chunk), failed, lost, firstErr)
	k.c.log.LogAttrs(ctx, slog.LevelDebug, "lease_renewed",
		slog.Int("leases", len(chunk)), slog.Int("failed", failed), logattr.Duration("took", took))
}
