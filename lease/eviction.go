package lease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

// ErrEvicted is joined to ErrNotHeld in the cause of a lease lost while
// Redis was seen evicting keys (redislease.Eviction.AllowEviction): its
// key was most likely evicted.
var ErrEvicted = errors.New("lease: Redis evicted keys while the lease was held (maxmemory-policy)")

// evictionPollInterval is the least time between two reads of Redis's
// eviction counter by a Client. It is read on renewal passes, so with long
// TTLs less often: at most every renewInterval of the shortest TTL held.
const evictionPollInterval = time.Second

// evictions is a Client's record of the evictions it saw.
type evictions struct {
	mu       sync.Mutex
	lastPoll time.Time // zero: never
	lastSeen time.Time // zero: none seen
}

// watchEvictions reads the backend's eviction counter when due (or now,
// when a renewal found a lease not held), reports evictions, and returns
// when evictions were last seen (zero: never): a lease found not held
// within its TTL of that was most likely evicted.
func (c *Client) watchEvictions(ctx context.Context, now bool) time.Time {
	ec, ok := c.b.(leasedriver.EvictionCounter)
	if !ok {
		return time.Time{}
	}
	if rb, ok := c.b.(*redislease.Backend); ok && !rb.Evicting() {
		return time.Time{}
	}
	c.ev.mu.Lock()
	defer c.ev.mu.Unlock()
	t := time.Now()
	if now || c.ev.lastPoll.IsZero() || t.Sub(c.ev.lastPoll) >= evictionPollInterval {
		c.ev.lastPoll = t
		n, err := ec.Evictions(ctx)
		switch {
		case err != nil:
			c.log.LogAttrs(ctx, slog.LevelWarn, "redis_evictions_unread", slog.String("error", err.Error()))
		case n > 0:
			c.ev.lastSeen = t
			c.log.LogAttrs(ctx, slog.LevelWarn, "redis_evictions",
				slog.Int64("evicted", n),
				slog.String("hint", "Redis evicts keys (maxmemory-policy): a lease whose key is evicted can be taken by another owner before its holder learns of it; set maxmemory-policy noeviction"))
			c.opts.Observer.ObserveEvictions(n)
		}
	}
	return c.ev.lastSeen
}

// notHeldCause is the cause of a lease of ttl found not held: ErrNotHeld,
// joined with ErrEvicted when evictions were seen within its TTL.
func notHeldCause(evictedAt time.Time, ttl time.Duration) error {
	if !evictedAt.IsZero() && time.Since(evictedAt) <= ttl {
		return fmt.Errorf("%w: %w", ErrNotHeld, ErrEvicted)
	}
	return ErrNotHeld
}
