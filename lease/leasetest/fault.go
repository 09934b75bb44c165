package leasetest

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/internal/testhooks"
	"github.com/holdfast-go/holdfast/lease/leasejoin"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

// Freeze stops l as a stop-the-world pause would: its keep-alive stops
// renewing it and its local expiry stops, so l.Context stays live and
// l.Err stays nil (a paused process checks nothing) and the holder keeps
// believing it holds the lease, while Redis lets the key run out (or
// ForceExpire deletes it). A test of the advice to check Err right before
// an unfenced effect lets the lease expire unfrozen instead. A renewal already on the wire when it is
// called does not count either way: the frozen lease ignores its answer, as
// a paused process reads it only once it runs again. Freezing a lost,
// frozen or nil lease does nothing.
func Freeze(l *lease.Lease) {
	if l != nil {
		testhooks.Freeze(l)
	}
}

// Thaw resumes a lease stopped by Freeze. When its trust window
// (l.Deadline) passed while it was frozen, l is lost at once with
// lease.ErrExpired; otherwise the keep-alive resumes, and finds out at its
// next renew whether the key is still ours (lease.ErrNotHeld if not).
// Thawing a lease that is not frozen does nothing.
func Thaw(l *lease.Lease) {
	if l != nil {
		testhooks.Thaw(l)
	}
}

// ErrNotRedis is returned by ForceExpire for a Client whose backend is no
// *redislease.Backend.
var ErrNotRedis = errors.New("leasetest: needs a Client on redislease.Backend")

// ForceExpire deletes the key of the lease called name, as Redis expiring
// it would: a new acquirer succeeds at once, and the holder, unless frozen,
// is lost with lease.ErrNotHeld at its next renew (within
// a third of its TTL). Waiters blocked in Client.Acquire are
// woken as by a release. The fence counter is kept, so the next token is
// still larger. c must be on a *redislease.Backend (lease.New), which
// gives the keys; rdb must be a client of the Redis c uses (nil: the
// backend's own).
//
// It deletes the key whoever holds it: call it while the holder you mean
// to expire still holds the lease (a frozen holder's key may have expired
// and been taken by someone else already). It is not an error when the key
// is already gone. Errors: ErrNotRedis for a Client on another backend,
// lease.ErrInvalidName for a bad name, Redis errors.
func ForceExpire(ctx context.Context, rdb redis.UniversalClient, c *lease.Client, name string) error {
	rb, ok := leasejoin.Backend(c).(*redislease.Backend)
	if !ok {
		return fmt.Errorf("leasetest: expire %q: %w, not %T", name, ErrNotRedis, leasejoin.Backend(c))
	}
	if rdb == nil {
		rdb = rb.Redis()
	}
	keys, err := rb.Keys(name)
	if err != nil {
		return fmt.Errorf("leasetest: expire %q: %w", name, err)
	}
	n, err := rdb.Del(ctx, keys.Lease).Result()
	if err != nil {
		return fmt.Errorf("leasetest: expire %q: %w", name, err)
	}
	if n == 0 {
		return nil
	}
	// The channel lease's release script publishes on; a waiter that
	// misses this still retries within Options.RetryMax.
	if err := rdb.Publish(ctx, keys.Released, "1").Err(); err != nil {
		return fmt.Errorf("leasetest: expire %q: wake waiters: %w", name, err)
	}
	return nil
}
