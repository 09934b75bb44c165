package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/ownerarg"
	"github.com/holdfast-go/holdfast/internal/safe"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
)

// Lease is one acquisition of a named lease. The Client's keep-alive renews
// it every TTL/3 until Release is called, the lease is lost, or
// the lifetime context (WithLifetime) ends. All methods are safe for concurrent use and on a
// nil *Lease (which behaves as a lost lease).
type Lease struct {
	c      *Client
	name   string
	owner  string
	token  fence.Token
	ttl    time.Duration
	handle any             // the backend's Grant.Handle
	parent context.Context // the context passed to Acquire: its values only

	mu         sync.Mutex
	ctx        context.Context // Context, made on first use; nil until then
	cancel     context.CancelCauseFunc
	deadline   time.Time // end of the trust window (monotonic reading)
	nextRenew  time.Time // when the keep-alive renews next
	ended      bool
	frozen     bool        // by leasetest.Freeze: no renewals, no expiry
	stopParent func() bool // unregisters the lifetime-context watch

	releasing   bool          // a release call is in flight
	releaseDone chan struct{} // made by a release waiting for the one in flight, closed when it ends
	released    bool          // the release has an answer from the backend
	releaseErr  error

	lost LostError // the cause of the loss, set once by end
}

// newLease returns the lease of an acquisition made at start. It starts no
// timer of its own: the Client's keeper renews it and ends it at the end of
// its trust window. Its context is made when first asked for (most holders
// of a short lease never ask), already canceled if the lease ended by then.
// parent is the acquire call's context (values only); lifetime, when not
// nil, ends the lease (WithLifetime).
func newLease(parent, lifetime context.Context, c *Client, name, owner string, g leasedriver.Grant, ttl time.Duration, start time.Time) *Lease {
	l := &Lease{
		c: c, name: name, owner: owner, token: g.Token, ttl: ttl, handle: g.Handle, parent: parent,
		deadline:  start.Add(ttl - drift(ttl)),
		nextRenew: start.Add(renewInterval(ttl)),
	}
	// The lease's context keeps the acquire call's values but not its
	// cancellation (that only bounded the wait). The lifetime context's
	// end is watched here, to give the loss its cause. One that never
	// ends (context.Background and kin) needs no watch.
	if lifetime != nil && lifetime.Done() != nil {
		l.mu.Lock()
		l.stopParent = context.AfterFunc(lifetime, func() {
			l.end(fmt.Errorf("%w: %w", ErrParentDone, context.Cause(lifetime)))
			// Free the key for the next holder now rather than at TTL.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(parent), ttl)
			defer cancel()
			_ = l.releaseKey(rctx, c.b.Release)
		})
		l.mu.Unlock()
	}
	c.keeper.add(l)
	return l
}

// held describes the lease to the backend.
func (l *Lease) held() leasedriver.Held {
	return leasedriver.Held{Name: l.name, Owner: l.owner, TTL: l.ttl, Handle: l.handle}
}

// Name returns the lease name.
func (l *Lease) Name() string {
	if l == nil {
		return ""
	}
	return l.name
}

// Token returns the fencing token issued with this acquisition. Present it
// to every sink as part of Holder, which names the lease it belongs to.
func (l *Lease) Token() fence.Token {
	if l == nil {
		return fence.None
	}
	return l.token
}

// Holder returns what this acquisition presents to every sink: Scope is
// the lease name, Token is Token(), Owner is the random owner of this
// acquisition (32 hex digits, 128 bits from crypto/rand). Sinks keep their
// fence per (resource, scope), so the tokens of different leases are never
// compared with each other (see package fence). The owner is a write
// capability: it goes to sinks and nowhere else (logs and views show
// fence.OwnerID(h.Owner)), which is why the Lease has no accessor of its
// own for it.
func (l *Lease) Holder() fence.Holder {
	if l == nil {
		return fence.Holder{}
	}
	return fence.Holder{Scope: l.name, Token: l.token, Owner: l.owner}
}

// String formats l for people: its name, token and owner id
// (fence.OwnerID), never its owner, a write capability (docs/security.md):
// no fmt verb of a *Lease prints it (Format).
func (l *Lease) String() string {
	if l == nil {
		return "<nil>"
	}
	return fmt.Sprintf("{Name:%q Token:%d OwnerID:%s}", l.name, l.token, fence.OwnerID(l.owner))
}

// GoString is String, for fmt's %#v.
func (l *Lease) GoString() string {
	if l == nil {
		return "(*lease.Lease)(nil)"
	}
	return "&lease.Lease" + l.String()
}

// Format implements fmt.Formatter: %#v prints GoString, %q String quoted,
// every other verb (%d and %x included) String, so no verb prints the
// owner. A struct that keeps a *Lease in an unexported field is printed
// by reflection, which calls no method: see fence.Holder.String.
func (l *Lease) Format(f fmt.State, verb rune) {
	ownerarg.FormatMasked(f, verb, l.String(), l.GoString())
}

// LogValue implements slog.LogValuer: the name, token and owner_id, never
// the owner.
func (l *Lease) LogValue() slog.Value {
	if l == nil {
		return slog.StringValue("<nil>")
	}
	return slog.GroupValue(slog.String("name", l.name), slog.Uint64("token", uint64(l.token)), slog.String("owner_id", fence.OwnerID(l.owner)))
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
// (context.Cause) is a *LostError. It carries Holder() for
// fence.HolderFromContext, and the values of the context passed to Acquire
// (not its cancellation: that context bounds the wait only).
func (l *Lease) Context() context.Context {
	if l == nil || l.c == nil { // nil, or a zero Lease{} not made by a Client
		return canceledContext()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		base := l.parent
		if base.Done() != nil {
			base = context.WithoutCancel(base)
		}
		ctx, cancel := context.WithCancelCause(base)
		l.ctx, l.cancel = fence.WithHolder(ctx, l.Holder()), cancel
		if l.ended {
			cancel(&l.lost)
		}
	}
	return l.ctx
}

// Done is Context().Done().
func (l *Lease) Done() <-chan struct{} { return l.Context().Done() }

// Err returns nil while the lease is held, and the *LostError that ended
// it afterwards (the cause of Context). It reads the trust window itself:
// once Deadline has passed it ends the lease (ErrExpired) and reports it,
// even if the keep-alive has not run yet (a starved process, a late
// timer), so a holder that checks Err before it acts never acts past its
// window.
func (l *Lease) Err() error {
	if l == nil || l.c == nil {
		return &LostError{Reason: ErrNotHeld}
	}
	l.expire(time.Now()) // a no-op within the window, when frozen or ended
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.ended {
		return nil
	}
	return &l.lost
}

// Deadline returns the end of the trust window: the holder may act until
// then. It moves forward with each successful renew, to the renew call's
// start + TTL - leasedriver.Drift(TTL) (1% of TTL + 2 ms).
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
// to the start of this call + TTL - leasedriver.Drift(TTL), never further.
//
// Errors: a *LostError when the lease had already ended; ErrNotHeld when
// Redis says we no longer own it (the lease is then lost with that cause,
// joined with ErrEvicted when Redis was seen evicting keys, see
// Eviction);
// Redis errors otherwise (the lease stays held until its trust window
// ends), joined with ctx's error when ctx ended; ErrNilContext for a nil
// ctx.
func (l *Lease) Renew(ctx context.Context) error {
	if err := l.Err(); err != nil {
		return err
	}
	if ctx == nil {
		return ErrNilContext
	}
	start := time.Now()
	err := l.c.b.Renew(ctx, []leasedriver.Held{l.held()})[0]
	l.c.opts.Observer.ObserveRenew(l.name, err, time.Since(start))
	if errors.Is(err, ErrNotHeld) {
		cause := notHeldCause(l.c.watchEvictions(ctx, true), l.ttl)
		l.end(cause)
		return fmt.Errorf("lease %q: renew: %w", l.name, cause)
	}
	if err != nil {
		return safe.JoinCtx(ctx, fmt.Errorf("lease %q: renew: %w", l.name, err))
	}
	return l.renewed(start)
}

// renewed moves the trust window after a renew call that started at start
// succeeded. It returns a *LostError when the lease had already ended
// (the keeper ends it at the end of its trust window) while the answer was
// on the wire.
func (l *Lease) renewed(start time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return &l.lost
	}
	l.nextRenew = start.Add(renewInterval(l.ttl))
	if d := start.Add(l.ttl - drift(l.ttl)); d.After(l.deadline) {
		// The keeper's timer, armed no later than the old deadline, finds
		// the new one when it fires.
		l.deadline = d
	}
	return nil
}

// renewFailed schedules the next attempt after a failed renew call: a
// quarter interval later. The trust window does not move.
func (l *Lease) renewFailed(err error) {
	l.mu.Lock()
	l.nextRenew = time.Now().Add(max(renewInterval(l.ttl)/4, time.Millisecond))
	l.mu.Unlock()
	l.c.log.LogAttrs(context.Background(), slog.LevelDebug, "lease_renew_failed",
		slog.String("lease", l.name), slog.Any("error", err))
}

// schedule returns when the lease is due for renewal, when its trust
// window ends, and whether it ended or is frozen (then the keeper neither
// renews nor expires it).
func (l *Lease) schedule() (nextRenew, deadline time.Time, ended, frozen bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nextRenew, l.deadline, l.ended, l.frozen
}

// Release ends the lease: it cancels Context with ErrReleased (before the
// key is deleted, so no one else can hold the lease while we still think we
// do), stops keeping it alive, then deletes the key if we still own it, in
// one round trip, waking the waiters of Acquire. It is idempotent: once
// the backend answered, every call returns that answer; a call that got no
// answer (ctx ended, Redis unreachable) returns the error and a later call
// tries again (the key expires with its TTL otherwise).
//
// Errors: ErrNotHeld when the key was no longer ours (it expired or was
// taken, and the lease had been lost); nil after a loss by the lifetime
// context (WithLifetime), which released the key itself; Redis errors;
// ctx's error when ctx ended first; ErrNilContext for a nil ctx (nothing
// is released: call again with a context).
func (l *Lease) Release(ctx context.Context) error {
	if l == nil || l.c == nil {
		return ErrNotHeld
	}
	return l.releaseWith(ctx, l.c.b.Release)
}

// releaseWith is Release with the key deleted by release instead of the
// backend's Release: lease/leasejoin's Release, which documents it.
func (l *Lease) releaseWith(ctx context.Context, release func(ctx context.Context, h leasedriver.Held) error) error {
	if l == nil || l.c == nil {
		return ErrNotHeld
	}
	if ctx == nil {
		return ErrNilContext
	}
	l.end(ErrReleased)
	if err := l.c.keeper.remove(ctx, l); err != nil {
		return fmt.Errorf("lease %q: release: waiting for keep-alive: %w", l.name, err)
	}
	return l.releaseKey(ctx, release)
}

// releaseKey runs the compare-and-delete once: concurrent calls wait for
// the one in flight (or for their ctx), and once the backend answered,
// every call returns that answer.
func (l *Lease) releaseKey(ctx context.Context, release func(context.Context, leasedriver.Held) error) error {
	l.mu.Lock()
	for l.releasing {
		if l.releaseDone == nil {
			l.releaseDone = make(chan struct{})
		}
		done := l.releaseDone
		l.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return safe.JoinCtx(ctx, fmt.Errorf("lease %q: release: another release is in flight", l.name))
		}
		l.mu.Lock()
	}
	if l.released {
		defer l.mu.Unlock()
		return l.releaseErr
	}
	l.releasing = true
	l.mu.Unlock()

	err := release(ctx, l.held())

	l.mu.Lock()
	defer l.mu.Unlock()
	l.releasing = false
	if l.releaseDone != nil {
		close(l.releaseDone)
		l.releaseDone = nil
	}
	switch {
	case errors.Is(err, ErrNotHeld):
		l.released = true
		l.releaseErr = fmt.Errorf("lease %q: release: %w", l.name, ErrNotHeld)
	case err != nil:
		// No answer (ctx ended, Redis unreachable): a later Release may
		// try again; the key expires with its TTL otherwise.
		return safe.JoinCtx(ctx, fmt.Errorf("lease %q: release: %w", l.name, err))
	default:
		l.released = true
		l.c.log.LogAttrs(ctx, slog.LevelInfo, "lease_released",
			slog.String("lease", l.name), slog.Uint64("token", uint64(l.token)))
	}
	return l.releaseErr
}

// end cancels the context with reason, once.
func (l *Lease) end(reason error) { l.endAt(reason, time.Time{}) }

// expire ends the lease with ErrExpired if its trust window ended by now
// and it is not frozen. The check and the end are one step under l.mu, so
// a renewal that moved the window meanwhile wins.
func (l *Lease) expire(now time.Time) { l.endAt(ErrExpired, now) }

func (l *Lease) endAt(reason error, expiredBy time.Time) {
	l.mu.Lock()
	if l.ended || (!expiredBy.IsZero() && (l.frozen || expiredBy.Before(l.deadline))) {
		l.mu.Unlock()
		return
	}
	l.ended = true
	l.lost = LostError{Name: l.name, Reason: reason}
	if l.cancel != nil {
		l.cancel(&l.lost)
	}
	stopParent := l.stopParent
	l.mu.Unlock()
	if stopParent != nil {
		stopParent()
	}
	l.c.keeper.forget(l)
	l.c.opts.Observer.ObserveLoss(l.name, reason)
	if !errors.Is(reason, ErrReleased) {
		l.traceLoss(reason)
		l.c.log.LogAttrs(context.Background(), slog.LevelWarn, "lease_lost",
			slog.String("lease", l.name), slog.Uint64("token", uint64(l.token)), slog.String("cause", reason.Error()))
	}
}

func canceledContext() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(&LostError{Reason: ErrNotHeld})
	return ctx
}
