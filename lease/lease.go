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

// Lease is one acquisition of a named lease. Its keep-alive renews it every
// RenewInterval(TTL) until Release is called, the lease is lost, or the
// parent context ends. All methods are safe for concurrent use and on a nil
// *Lease (which behaves as a lost lease).
type Lease struct {
	c     *Client
	name  string
	owner string
	token fence.Token
	ttl   time.Duration

	ctx    context.Context
	cancel context.CancelCauseFunc

	mu       sync.Mutex
	deadline time.Time   // end of the trust window (monotonic reading)
	expiry   *time.Timer // fires end(ErrExpired) at deadline
	ended    bool

	stop       chan struct{} // closed by end
	done       chan struct{} // closed when the keep-alive returns
	stopParent func() bool   // unregisters the parent-context watch

	releaseOnce sync.Once
	releaseErr  error
}

func newLease(parent context.Context, c *Client, name, owner string, token fence.Token, ttl time.Duration, start time.Time) *Lease {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	l := &Lease{
		c: c, name: name, owner: owner, token: token, ttl: ttl,
		ctx:      fence.WithToken(ctx, token, owner),
		cancel:   cancel,
		deadline: start.Add(ttl - Drift(ttl)),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
	}
	l.mu.Lock()
	l.expiry = time.AfterFunc(time.Until(l.deadline), l.expire)
	l.stopParent = context.AfterFunc(parent, func() {
		l.end(errors.Join(ErrParentDone, context.Cause(parent)))
	})
	l.mu.Unlock()
	go l.keepAlive()
	return l
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
// fence.FromContext. It keeps the parent's values.
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
// calls it; call it yourself only to renew early. The trust window moves to
// the start of this call + TTL - Drift, never further.
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
	leaseKey, _ := l.c.Keys(l.name)
	n, err := renewScript.Run(ctx, l.c.rdb, []string{leaseKey}, l.owner, l.ttl.Milliseconds()).Int64()
	if err != nil {
		return joinCtx(ctx, fmt.Errorf("lease %q: renew: %w", l.name, err))
	}
	if n != 1 {
		l.end(ErrNotHeld)
		return fmt.Errorf("lease %q: renew: %w", l.name, ErrNotHeld)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ended {
		return context.Cause(l.ctx)
	}
	if d := start.Add(l.ttl - Drift(l.ttl)); d.After(l.deadline) {
		l.deadline = d
		if !l.expiry.Stop() {
			// The trust window ended while the call was on the wire: the
			// expiry callback is ending the lease.
			return &LostError{Name: l.name, Reason: ErrExpired}
		}
		l.expiry.Reset(time.Until(d))
	}
	l.c.log.LogAttrs(ctx, slog.LevelDebug, "lease_renewed",
		slog.String("lease", l.name), slog.Uint64("token", uint64(l.token)), slog.Duration("took", time.Since(start)))
	return nil
}

// Release ends the lease: it cancels Context with ErrReleased (before the
// key is deleted, so no one else can hold the lease while we still think we
// do), stops the keep-alive and waits for it, then deletes the key if we
// still own it, in one round trip. It is idempotent: every call returns the
// first call's result.
//
// Errors: ErrNotHeld when the key was no longer ours (the lease had been
// lost); Redis errors; ctx's error when ctx ended while waiting.
func (l *Lease) Release(ctx context.Context) error {
	if l == nil {
		return ErrNotHeld
	}
	l.end(ErrReleased)
	select {
	case <-l.done:
	case <-ctx.Done():
		return fmt.Errorf("lease %q: release: waiting for keep-alive: %w", l.name, ctx.Err())
	}
	return l.releaseKey(ctx)
}

// releaseKey runs the compare-and-delete once.
func (l *Lease) releaseKey(ctx context.Context) error {
	l.releaseOnce.Do(func() {
		leaseKey, _ := l.c.Keys(l.name)
		n, err := releaseScript.Run(ctx, l.c.rdb, []string{leaseKey}, l.owner).Int64()
		switch {
		case err != nil:
			l.releaseErr = joinCtx(ctx, fmt.Errorf("lease %q: release: %w", l.name, err))
		case n != 1:
			l.releaseErr = fmt.Errorf("lease %q: release: %w", l.name, ErrNotHeld)
		default:
			l.c.log.LogAttrs(ctx, slog.LevelInfo, "lease_released",
				slog.String("lease", l.name), slog.Uint64("token", uint64(l.token)))
		}
	})
	return l.releaseErr
}

// expire is the trust-window timer's callback.
func (l *Lease) expire() { l.end(ErrExpired) }

// end cancels the context with reason (once) and stops the keep-alive.
func (l *Lease) end(reason error) {
	l.mu.Lock()
	if l.ended {
		l.mu.Unlock()
		return
	}
	l.ended = true
	l.expiry.Stop()
	cause := &LostError{Name: l.name, Reason: reason}
	l.cancel(cause)
	close(l.stop)
	stopParent := l.stopParent
	l.mu.Unlock()
	if stopParent != nil {
		stopParent()
	}
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
