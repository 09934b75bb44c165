package lease

import (
	"context"
	"errors"
	"time"
)

// keepAlive renews the lease every RenewInterval(TTL) until end is called.
// A failed renew (Redis error or timeout) is retried at a quarter of the
// interval; it never extends the trust window, whose timer ends the lease
// by itself if no renew succeeds in time. A "not owner" answer ends the
// lease at once. When the parent context ended, the keep-alive releases the
// key on its way out, bounded by the TTL.
func (l *Lease) keepAlive() {
	defer close(l.done)
	interval := RenewInterval(l.ttl)
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-l.stop:
			if errors.Is(context.Cause(l.ctx), ErrParentDone) {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(l.ctx), l.ttl)
				_ = l.releaseKey(ctx) // best effort: the TTL frees it otherwise
				cancel()
			}
			return
		case <-timer.C:
		}
		ctx, cancel := context.WithDeadline(l.ctx, l.Deadline())
		err := l.Renew(ctx)
		cancel()
		switch {
		case err == nil:
			timer.Reset(interval)
		case l.Err() != nil:
			// Lost (not owner, trust window ended) or released: the next
			// loop iteration sees stop closed.
			timer.Reset(0)
		default:
			timer.Reset(max(interval/4, time.Millisecond))
		}
	}
}
