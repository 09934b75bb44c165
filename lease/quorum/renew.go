package quorum

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"

	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
)

// Renew implements leasedriver.Backend: redsync Extend of each lease, up to
// Options.RenewParallelism at once. A lease is ErrNotHeld when a majority
// of the masters say the key is not ours; *NoQuorumError (retryable) when
// neither a majority extended it nor a majority refused.
func (b *Backend) Renew(ctx context.Context, batch []leasedriver.Held) []error {
	errs := make([]error, len(batch))
	workers := min(len(batch), b.opts.RenewParallelism)
	if workers <= 1 {
		for i, h := range batch {
			errs[i] = b.renew(ctx, h)
		}
		return errs
	}
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(batch); i = int(next.Add(1) - 1) {
				errs[i] = b.renew(ctx, batch[i])
			}
		})
	}
	wg.Wait()
	return errs
}

func (b *Backend) renew(ctx context.Context, h leasedriver.Held) error {
	e := b.lookup(h.Name, h.Owner, h.TTL, false)
	e.mu.Lock()
	defer e.mu.Unlock()
	ok, err := e.m.ExtendContext(ctx)
	if ok {
		return nil
	}
	return b.verdict("renew", err)
}

// Release implements leasedriver.Backend: redsync Unlock, whose delete script
// also wakes the waiters subscribed on each master. ErrNotHeld when a
// majority say the key is not ours; *NoQuorumError when neither a majority
// deleted it nor a majority refused (the keys then expire with their TTL).
func (b *Backend) Release(ctx context.Context, h leasedriver.Held) error {
	// Unlock does not use the expiry: any valid TTL will do.
	e := b.lookup(h.Name, h.Owner, leasedriver.MinTTL, true)
	if e.call != nil {
		// A master whose grant is still on its way deletes it itself.
		e.call.abandon()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	ok, err := e.m.UnlockContext(context.WithValue(ctx, callKey{}, releaseCall))
	if ok {
		return nil
	}
	return b.verdict("release", err)
}

// lookup returns the entry of an acquisition, removing it from the map
// when remove is set. An acquisition this Backend does not know (released
// already, or made by another Backend over the same masters) gets a
// Mutex that carries its owner, as redsync allows.
func (b *Backend) lookup(name, owner string, ttl time.Duration, remove bool) *entry {
	k := heldKey{name, owner}
	b.mu.Lock()
	e := b.held[k]
	if remove {
		delete(b.held, k)
	}
	b.mu.Unlock()
	if e != nil {
		return e
	}
	leaseKey, _ := b.Keys(name)
	return &entry{m: b.newMutex(leaseKey, ttl, redsync.WithValue(owner))}
}

// verdict turns a failed redsync Extend or Unlock into lease.ErrNotHeld
// (a majority refused) or a *NoQuorumError (no majority either way).
func (b *Backend) verdict(op string, err error) error {
	if errors.Is(err, redsync.ErrExtendFailed) {
		return fmt.Errorf("quorum: %s: a majority answered, but later than the TTL allows: %w", op, err)
	}
	refused, failed := tally(err)
	if refused >= b.quorum {
		return lease.ErrNotHeld
	}
	answered := len(b.nodes) - failed
	return b.noQuorum(op, answered, answered-refused, err)
}

func (b *Backend) noQuorum(op string, answered, agreed int, err error) *NoQuorumError {
	return &NoQuorumError{Op: op, Nodes: len(b.nodes), Quorum: b.quorum, Answered: answered, Agreed: agreed, Err: err}
}

// tally counts, in an error from redsync's Extend or Unlock, the masters
// that refused (key gone or someone else's) and those that failed.
func tally(err error) (refused, failed int) {
	switch e := err.(type) {
	case nil:
	case interface{ Unwrap() []error }:
		for _, x := range e.Unwrap() {
			r, f := tally(x)
			refused, failed = refused+r, failed+f
		}
	case *redsync.ErrTaken:
		refused += len(e.Nodes)
	case *redsync.ErrNodeTaken:
		refused++
	case *redsync.RedisError:
		failed++
	default:
		if errors.Is(err, redsync.ErrLockAlreadyExpired) {
			refused++
		}
	}
	return refused, failed
}
