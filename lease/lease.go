package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/fence"
)

// Lease is one acquisition of a named lease. The Client's keep-alive renews
// it every RenewInterval(TTL) until Release is called, the lease is lost, or
// the parent context ends. All methods are safe for concurrent use and on a
// nil *Lease (which behaves as a lost lease).
type Lease struct {
	c     *Client
	name  string
	owner string
	token fence.Token
	ttl   time.Duration

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu         sync.Mutex
	deadline   time.Time   // end of the trust window (monotonic reading)
	nextRenew  time.Time   // when the keep-alive renews next
	expiry     *time.Timer // ends the lease at deadline
	ended      bool
	frozen     bool        // by leasetest.Freeze: no renewals, no expiry
	stopParent func() bool // unregisters the parent-context watch

	releaseSem chan struct{} // one slot: serialises releaseKey, honouring ctx
	released   bool          // the release has an answer from the backend
	releaseErr error

	lost LostError // the cause of the loss, set once by end
}

func newLease(parent context.Context, c *Client, name, owner string, token fence.Token, ttl time.Duration, start time.Time) *Lease {
	// The lease's context keeps the parent's values but not its
	// cancellation: the parent's end is watched below, to give the loss
	// its cause. A parent that never ends (context.Background and kin)
	// needs neither the stripping nor the watch.
	base := parent
	if parent.Done() != nil {
		base = context.WithoutCancel(parent)
	}
	ctx, cancel := context.WithCancelCause(base)
	l := &Lease{
		c: c, name: name, owner: owner, token: token, ttl: ttl,
		ctx:        fence.WithToken(ctx, token, owner),
		cancel:     cancel,
		deadline:   start.Add(ttl - Drift(ttl)),
		nextRenew:  start.Add(RenewInterval(ttl)),
		releaseSem: make(chan struct{}, 1),
	}
	l.mu.Lock()
	l.expiry = time.AfterFunc(time.Until(l.deadline), func() { l.end(ErrExpired) })
	if parent.Done() != nil {
		l.stopParent = context.AfterFunc(parent, func() {
			l.end(errors.Join(ErrParentDone, context.Cause(parent)))
			// Free the key for the next holder now rather than at TTL.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(parent), ttl)
			defer cancel()
			_ = l.releaseKey(rctx)
		})
	}
	l.mu.Unlock()
	c.keeper.add(l)
	return l
}

// leaseKey returns the Redis key of the lease (built on demand: only
// ReplicaAck on a Cluster needs it).
func (l *Lease) leaseKey() string {
	k, _ := l.c.Keys(l.name)
	return k
}

// Name returns the lease name.
func (l *Lease) Name() string {
	if l == nil {
		return ""
	}
	return l.name
}

// Owner returns the random owner value of this acquisition (32 hex digits).
func (l *Lease) Owner() string {
	if l == nil {
		return ""
	}
	return l.owner
}

// Token returns the fencing token issued with this acquisition. Present it,
// with Owner, to every sink.
func (l *Lease) Token() fence.Token {
	if l == nil {
		return fence.None
	}
	return l.token
}

// TTL returns the TTL the lease was acquired with.
func (l *Lease) TTL() time.Duration {
	if l == nil {
		return 0
	}
	return l.ttl
}

// Context returns a context that is canceled when the lease is lost or
// released, no later than the end of the trust window. Its cause
// (context.Cause) is a *LostError. It carries the token and owner for
// fence.FromContext, and the values of the context passed to Acquire.
func (l *Lease) Context() context.Context {
	if l == nil {
		return canceledContext()
	}
	return l.ctx
}

// Done is Context().Done().
func (l *Lease) Done() <-chan struct{} { return l.Context().Done() }

// Err returns nil while the lease is held, and the *LostError that ended
// it afterwards.
func (l *Lease) Err() error {
	ctx := l.Context()
	if ctx.Err() == nil {
		return nil
	}
	return context.Cause(ctx)
}

// Deadline returns the end of the trust window: the holder may act until
// then. It moves forward with each successful renew, to the renew call's
// start + TTL - Drift(TTL).
func (l *Lease) Deadline() time.Time {
	if l == nil {
		return time.Time{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.deadline
}

// Renew extends the lease by its TTL now, in one round trip. The keep-alive
// renews on its own; call Renew only to renew early. The trust window moves
// to the start of this call + TTL - Drift, never further.
//
// Errors: a *LostError when the lease had already ended; ErrNotHeld when
// Redis says we no longer own it (the lease is then lost with that cause);
// Redis errors otherwise (the lease stays held until its trust window
// ends), joined with ctx's error when ctx ended.
func (l *Lease) Renew(ctx context.Context) error {
	if err := l.Err(); err != nil {
		return err
	}
	start := time.Now()
	err := l.c.b.Renew(ctx, []Held{{Name: l.name, Owner: l.owner, TTL: l.ttl}})[0]
	l.c.opts.Observer.ObserveRenew(l.name, err, time.Since(start))
	if errors.Is(err, ErrNotHeld) {
		l.end(ErrNotHeld)
		return fmt.Errorf("lease %q: renew: %w", l.name, ErrNotHeld)
	}
	if err != nil {
		return joinCtx(ctx, fmt.Errorf("lease %q: renew: %w", l.name, err))
	}
	return l.renewed(start)
}

// renewed moves the trust window after a renew call that started at start
// succeeded. It returns a *LostError when the window had already ended
// while the answer was on the wire.
func (l *Lease) renewed(start time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return context.Cause(l.ctx)
	}
	l.nextRenew = start.Add(RenewInterval(l.ttl))
	if d := start.Add(l.ttl - Drift(l.ttl)); d.After(l.deadline) && l.frozen {
		l.deadline = d // thaw re-arms the timer
	} else if d.After(l.deadline) {
		if !l.expiry.Stop() {
			// The expiry callback is ending the lease.
			return &LostError{Name: l.name, Reason: ErrExpired}
		}
		l.deadline = d
		l.expiry.Reset(time.Until(d))
	}
	return nil
}

// renewFailed schedules the next attempt after a failed renew call: a
// quarter interval later. The trust window does not move.
func (l *Lease) renewFailed(err error) {
	l.mu.Lock()
	l.nextRenew = time.Now().Add(max(RenewInterval(l.ttl)/4, time.Millisecond))
	l.mu.Unlock()
	l.c.log.LogAttrs(context.Background(), slog.LevelDebug, "lease_renew_failed",
		slog.String("lease", l.name), slog.Any("error", err))
}

// renewState returns when the lease is due for renewal and whether it
// ended.
func (l *Lease) renewState() (next time.Time, ended bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.frozen {
		return l.nextRenew.Add(time.Hour), l.ended
	}
	return l.nextRenew, l.ended
}

// Release ends the lease: it cancels Context with ErrReleased (before the
// key is deleted, so no one else can hold the lease while we still think we
// do), stops keeping it alive, then deletes the key if we still own it, in
// one round trip, waking the waiters of Acquire. It is idempotent: once
// the backend answered, every call returns that answer; a call that got no
// answer (ctx ended, Redis unreachable) returns the error and a later call
// tries again (the key expires with its TTL otherwise).
//
// Errors: ErrNotHeld when the key was no longer ours (the lease had been
// lost); Redis errors; ctx's error when ctx ended first.
func (l *Lease) Release(ctx context.Context) error {
	if l == nil {
		return ErrNotHeld
	}
	l.end(ErrReleased)
	if err := l.c.keeper.remove(ctx, l); err != nil {
		return fmt.Errorf("lease %q: release: waiting for keep-alive: %w", l.name, err)
	}
	return l.releaseKey(ctx)
}

// releaseKey runs the compare-and-delete once.
func (l *Lease) releaseKey(ctx context.Context) error {
	select {
	case l.releaseSem <- struct{}{}:
	case <-ctx.Done():
		return joinCtx(ctx, fmt.Errorf("lease %q: release: another release is in flight", l.name))
	}
	defer func() { <-l.releaseSem }()
	if l.released {
		return l.releaseErr
	}
	err := l.c.b.Release(ctx, l.name, l.owner)
	switch {
	case errors.Is(err, ErrNotHeld):
		l.released = true
		l.releaseErr = fmt.Errorf("lease %q: release: %w", l.name, ErrNotHeld)
	case err != nil:
		// No answer (ctx ended, Redis unreachable): a later Release may
		// try again; the key expires with its TTL otherwise.
		return joinCtx(ctx, fmt.Errorf("lease %q: release: %w", l.name, err))
	default:
		l.released = true
		l.c.log.LogAttrs(ctx, slog.LevelInfo, "lease_released",
			slog.String("lease", l.name), slog.Uint64("token", uint64(l.token)))
	}
	return l.releaseErr
}

// end cancels the context with reason, once.
func (l *Lease) end(reason error) {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return
	}
	l.ended = true
	l.expiry.Stop()
	l.lost = LostError{Name: l.name, Reason: reason}
	l.cancel(&l.lost)
	stopParent := l.stopParent
	l.mu.Unlock()
	if stopParent != nil {
		stopParent()
	}
	l.c.keeper.forget(l)
	l.c.opts.Observer.ObserveLoss(l.name, reason)
	if !errors.Is(reason, ErrReleased) {
		l.c.log.LogAttrs(context.Background(), slog.LevelWarn, "lease_lost",
			slog.String("lease", l.name), slog.Uint64("token", uint64(l.token)), slog.String("cause", reason.Error()))
	}
}

func canceledContext() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(&LostError{Reason: ErrNotHeld})
	return ctx
}
