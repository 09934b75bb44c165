package lease

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/fence"
)

// Backend stores leases for a Client. New builds a Client on the built-in
// single-deployment Redis backend; NewWithBackend takes another, such as the
// Redlock quorum backend of package lease/quorum. Every Backend must pass
// lease/leasetest.Exercise.
type Backend interface {
	// Acquire takes the lease called name for owner and ttl if it is free,
	// issuing a token strictly greater than every token issued before for
	// name. When another owner holds it, it returns Grant{Acquired: false}
	// with the holder's remaining TTL if known.
	Acquire(ctx context.Context, name, owner string, ttl time.Duration) (Grant, error)
	// Renew extends each lease of batch by its TTL if it still holds its
	// owner, and returns one result per lease: nil, ErrNotHeld, or another
	// error (retried until the trust window ends).
	Renew(ctx context.Context, batch []Held) []error
	// Release deletes the lease if it still holds owner; ErrNotHeld if not.
	Release(ctx context.Context, name, owner string) error
}

// Notifier is an optional Backend interface: Released returns a channel
// that receives when the lease called name is released, and a function to
// stop listening. A waiting Acquire uses it to wake up at once; without it,
// Acquire polls on the holder's remaining TTL.
type Notifier interface {
	Released(ctx context.Context, name string) (<-chan struct{}, func(), error)
}

// Grant is the answer to Backend.Acquire.
type Grant struct {
	Acquired bool
	Token    fence.Token
	// Remaining is the holder's remaining TTL when not acquired (0 when
	// unknown).
	Remaining time.Duration
}

// Held is a lease to renew.
type Held struct {
	Name, Owner string
	TTL         time.Duration
}

// redisBackend is the built-in backend: one Redis deployment, the scripts
// of this package, a pipeline per renewal batch, pub/sub on release.
type redisBackend struct {
	rdb    redis.UniversalClient
	prefix string
}

// Each key costs an allocation per call, so every call builds only the keys
// it needs: the lease key alone, or the lease and fence keys from one
// string. The release channel is built by release.lua.

func (b *redisBackend) leaseKey(name string) string { return b.prefix + "{" + name + "}" }

func (b *redisBackend) keys(name string) (leaseKey, fenceKey string) {
	fenceKey = b.prefix + "{" + name + "}:fence"
	return fenceKey[:len(fenceKey)-len(":fence")], fenceKey
}

func (b *redisBackend) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (Grant, error) {
	leaseKey, fenceKey := b.keys(name)
	// One integer, not an array: the reply costs no slices.
	res, err := acquireScript.Run(ctx, b.rdb, []string{leaseKey, fenceKey}, owner, ttl.Milliseconds()).Int64()
	if err != nil {
		return Grant{}, err
	}
	if res <= 0 {
		return Grant{Remaining: time.Duration(-res) * time.Millisecond}, nil
	}
	return Grant{Acquired: true, Token: fence.Token(res)}, nil
}

func (b *redisBackend) Renew(ctx context.Context, batch []Held) []error {
	if len(batch) == 1 {
		// Lease.Renew: a plain call costs half the allocations of a
		// pipeline of one.
		h := batch[0]
		n, err := renewScript.Run(ctx, b.rdb, []string{b.leaseKey(h.Name)}, h.Owner, h.TTL.Milliseconds()).Int64()
		if err == nil && n != 1 {
			err = ErrNotHeld
		}
		return []error{err}
	}
	cmds, err := b.pipeline(ctx, batch)
	if err != nil && isNoScript(err) {
		// After a SCRIPT FLUSH, a restart or a failover: load and retry.
		if lerr := b.rdb.ScriptLoad(ctx, renewSrc).Err(); lerr == nil {
			cmds, err = b.pipeline(ctx, batch)
		}
	}
	errs := make([]error, len(batch))
	for i := range batch {
		if cmds == nil {
			errs[i] = err
			continue
		}
		n, cerr := cmds[i].Int64()
		switch {
		case cerr != nil:
			errs[i] = cerr
		case n != 1:
			errs[i] = ErrNotHeld
		}
	}
	return errs
}

func (b *redisBackend) pipeline(ctx context.Context, batch []Held) ([]*redis.Cmd, error) {
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, h := range batch {
		cmds[i] = renewScript.EvalSha(ctx, pipe, []string{b.leaseKey(h.Name)}, h.Owner, h.TTL.Milliseconds())
	}
	_, err := pipe.Exec(ctx)
	return cmds, err
}

func (b *redisBackend) Release(ctx context.Context, name, owner string) error {
	n, err := releaseScript.Run(ctx, b.rdb, []string{b.leaseKey(name)}, owner).Int64()
	if err != nil {
		return err
	}
	if n != 1 {
		return ErrNotHeld
	}
	return nil
}

// Released subscribes to the lease's release channel; it returns once the
// subscription is active, so a release after it is never missed.
func (b *redisBackend) Released(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	sub := b.rdb.Subscribe(ctx, b.leaseKey(name)+":released")
	if _, err := sub.Receive(ctx); err != nil {
		_ = sub.Close()
		return nil, nil, err
	}
	msgs := sub.Channel(redis.WithChannelSize(1))
	out := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range msgs {
			select {
			case out <- struct{}{}:
			default:
			}
		}
	}()
	return out, func() { _ = sub.Close(); <-done }, nil
}

func isNoScript(err error) bool {
	return err != nil && len(err.Error()) >= 8 && err.Error()[:8] == "NOSCRIPT"
}

var _ Notifier = (*redisBackend)(nil)

// errNoRedis is returned by Redis-only features on a Client built on
// another backend.
var errNoRedis = errors.New("lease: needs the built-in Redis backend")
