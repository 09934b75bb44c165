package lease

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/autopipe"
	"github.com/holdfast-go/holdfast/internal/luascript"
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
	// Release deletes the lease if it still holds its owner; ErrNotHeld if
	// not.
	Release(ctx context.Context, h Held) error
}

// Notifier is an optional Backend interface: Released returns a channel
// that receives when the lease called name is released, and a function to
// stop listening. A waiting Acquire uses it to wake up at once; without it,
// Acquire polls on the holder's remaining TTL. The built-in backend
// notifies a release when a waiting Acquire flagged the lease (its tries
// once it listens flag it for twice its RetryMax), so that a release
// nobody waits for publishes nothing; a notification missed (a flag lost
// in a failover or a FLUSHALL) costs a waiter no more than its poll.
type Notifier interface {
	Released(ctx context.Context, name string) (<-chan struct{}, func(), error)
}

// waitingAcquirer is implemented by the built-in backend: Acquire, also
// flagging a held lease as waited for during flagTTL, so that its release
// notifies. Client.Acquire makes its tries with it once it listens
// (Notifier), with a flagTTL of twice its longest wait between two tries.
type waitingAcquirer interface {
	acquireWaiting(ctx context.Context, name, owner string, ttl, flagTTL time.Duration) (Grant, error)
}

// BatchAcquirer is an optional Backend interface: AcquireAll answers
// each request as Acquire would, in one round trip where it can, with one
// Grant and one error per request. Client.TryAcquireAll uses it.
type BatchAcquirer interface {
	AcquireAll(ctx context.Context, reqs []AcquireRequest) ([]Grant, []error)
}

// AcquireRequest is one acquisition of a batch.
type AcquireRequest struct {
	Name, Owner string
	TTL         time.Duration
}

// Grant is the answer to Backend.Acquire.
type Grant struct {
	Acquired bool
	Token    fence.Token
	// Remaining is the holder's remaining TTL when not acquired (0 when
	// unknown).
	Remaining time.Duration
	// Handle is the backend's own record of the acquisition (keys,
	// prepared arguments), passed back unchanged in Held.Handle to every
	// Renew and Release of it, so that they need not derive it again.
	// Optional: nil when the backend keeps none.
	Handle any
}

// Held is a lease to renew or release.
type Held struct {
	Name, Owner string
	TTL         time.Duration
	// Handle is Grant.Handle of the acquisition. A backend must also
	// accept a Held without it (nil), as for an acquisition it did not
	// make.
	Handle any
}

// redisBackend is the built-in backend: one Redis deployment, the scripts
// of this package, a pipeline per renewal batch, pub/sub on release.
type redisBackend struct {
	rdb    redis.UniversalClient
	auto   *autopipe.Pipe // acquire and release calls, batched when concurrent
	prefix string
}

// redisHandle is the built-in backend's Grant.Handle: the keys and
// arguments of one acquisition, built and boxed once at acquire and reused
// by its renewals and its release. Each script's command is prepared in
// full (EVALSHA, sha, key count, keys, arguments), so a call allocates only
// its redis.Cmd, where redis.Script.Run would build and box all of it
// again. A handle is never modified after newHandle, so calls may share
// it.
type redisHandle struct {
	owner       string
	acquireArgs [7]any // evalsha sha 2 lease fence owner ttl
	renewArgs   [6]any // evalsha sha 1 lease owner ttl
	releaseArgs [6]any // evalsha sha 2 lease waiting owner
}

func (b *redisBackend) newHandle(name, owner string, ttl time.Duration) *redisHandle {
	// One allocation for the three keys: the lease key is a prefix of the
	// fence key, and the waiting flag follows it in the same string. The
	// release channel is built by release.lua.
	n := len(b.prefix) + len(name) + len("{}")
	keys := b.prefix + "{" + name + "}:fence" + b.prefix + "{" + name + "}:waiting"
	var (
		leaseArg   any = keys[:n]
		fenceArg   any = keys[:n+len(":fence")]
		waitingArg any = keys[n+len(":fence"):]
		ownerArg   any = owner
		ttlArg     any = ttl.Milliseconds()
	)
	return &redisHandle{
		owner:       owner,
		acquireArgs: [...]any{cmdEvalSha, acquireScript.SHA(), 2, leaseArg, fenceArg, ownerArg, ttlArg},
		renewArgs:   [...]any{cmdEvalSha, renewScript.SHA(), 1, leaseArg, ownerArg, ttlArg},
		releaseArgs: [...]any{cmdEvalSha, releaseScript.SHA(), 2, leaseArg, waitingArg, ownerArg},
	}
}

// handle returns the handle of a held lease, building it when the Held
// carries none (an acquisition of another Client, or another backend's).
func (b *redisBackend) handle(h Held) *redisHandle {
	if rh, ok := h.Handle.(*redisHandle); ok && rh.owner == h.Owner {
		return rh
	}
	return b.newHandle(h.Name, h.Owner, h.TTL)
}

func (b *redisBackend) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (Grant, error) {
	h := b.newHandle(name, owner, ttl)
	return b.acquire(ctx, h, ttl, h.acquireArgs[:])
}

var _ waitingAcquirer = (*redisBackend)(nil)

// acquireWaiting implements waitingAcquirer: Acquire, flagging a held
// lease as waited for (acquire.lua's KEYS[3]) for flagTTL, so that its
// release publishes.
func (b *redisBackend) acquireWaiting(ctx context.Context, name, owner string, ttl, flagTTL time.Duration) (Grant, error) {
	h := b.newHandle(name, owner, ttl)
	a, waitingKey := &h.acquireArgs, h.releaseArgs[4]
	// evalsha sha 3 lease fence waiting owner ttl flagTTL
	args := [...]any{a[0], a[1], 3, a[3], a[4], waitingKey, a[5], a[6], max(flagTTL.Milliseconds(), 1)}
	return b.acquire(ctx, h, ttl, args[:])
}

func (b *redisBackend) acquire(ctx context.Context, h *redisHandle, ttl time.Duration, args []any) (Grant, error) {
	if err := ctx.Err(); err != nil {
		return Grant{}, err // nothing sent, nothing to undo
	}
	// One integer, not an array: the reply costs no slices.
	res, err := acquireScript.RunPrepared(ctx, b.auto, args).Int64()
	if err != nil {
		// The script may have run (a reply lost or late, ctx ended while
		// the call was on the wire): a key left with this owner would
		// block every other owner until its TTL.
		b.undo(ctx, []*redisHandle{h}, ttl)
		return Grant{}, err
	}
	if res <= 0 {
		return Grant{Remaining: time.Duration(-res) * time.Millisecond}, nil
	}
	return Grant{Acquired: true, Token: fence.Token(res), Handle: h}, nil
}

var _ BatchAcquirer = (*redisBackend)(nil)

// AcquireAll implements BatchAcquirer: one pipeline of acquire scripts.
// Commands the server refused with NOSCRIPT (a node that lost its script
// cache) run again with EVAL; the others are not sent again by this code.
// Should go-redis re-send the pipeline (a lost reply, TRYAGAIN on a
// Cluster), the acquire script answers an acquisition it already granted
// to the same owner with the same token.
func (b *redisBackend) AcquireAll(ctx context.Context, reqs []AcquireRequest) ([]Grant, []error) {
	handles := make([]*redisHandle, len(reqs))
	cmds := make([]*redis.Cmd, len(reqs))
	pipe := b.rdb.Pipeline()
	for i, r := range reqs {
		handles[i] = b.newHandle(r.Name, r.Owner, r.TTL)
		cmds[i] = acquireScript.Cmd(ctx, handles[i].acquireArgs[:])
		_ = pipe.Process(ctx, cmds[i])
	}
	_, _ = pipe.Exec(ctx) // errors are read per command
	grants, errs := make([]Grant, len(reqs)), make([]error, len(reqs))
	var failed []*redisHandle
	var ttl time.Duration
	for i, cmd := range cmds {
		res, err := acquireScript.Fallback(ctx, b.rdb, cmd).Int64()
		switch {
		case err != nil:
			errs[i] = err
			failed = append(failed, handles[i])
			ttl = max(ttl, reqs[i].TTL)
		case res <= 0:
			grants[i] = Grant{Remaining: time.Duration(-res) * time.Millisecond}
		default:
			grants[i] = Grant{Acquired: true, Token: fence.Token(res), Handle: handles[i]}
		}
	}
	b.undo(ctx, failed, ttl) // as in acquire
	return grants, errs
}

// undo deletes the keys of failed acquisitions that may have been taken,
// where they hold the acquisition's owner (release.lua), in one round trip,
// on a best effort: it runs without ctx's cancellation (the caller may
// have gone), bounded by ttl (the keys are gone by then anyway).
func (b *redisBackend) undo(ctx context.Context, hs []*redisHandle, ttl time.Duration) {
	if len(hs) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ttl)
	defer cancel()
	if len(hs) == 1 {
		_ = releaseScript.RunPrepared(rctx, b.rdb, hs[0].releaseArgs[:]).Err()
		return
	}
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(hs))
	for i, h := range hs {
		cmds[i] = releaseScript.Cmd(rctx, h.releaseArgs[:])
		_ = pipe.Process(rctx, cmds[i])
	}
	_, _ = pipe.Exec(rctx)
	for _, cmd := range cmds {
		_ = releaseScript.Fallback(rctx, b.rdb, cmd).Err()
	}
}

func (b *redisBackend) Renew(ctx context.Context, batch []Held) []error {
	if len(batch) == 1 {
		// Lease.Renew: a plain call costs half the allocations of a
		// pipeline of one.
		n, err := renewScript.RunPrepared(ctx, b.rdb, b.handle(batch[0]).renewArgs[:]).Int64()
		if err == nil && n != 1 {
			err = ErrNotHeld
		}
		return []error{err}
	}
	cmds, err := b.pipeline(ctx, batch)
	if err != nil && luascript.IsNoScript(err) {
		// After a SCRIPT FLUSH, a restart or a failover: load and retry.
		if lerr := b.rdb.ScriptLoad(ctx, renewScript.Source()).Err(); lerr == nil {
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
		cmds[i] = renewScript.Cmd(ctx, b.handle(h).renewArgs[:])
		_ = pipe.Process(ctx, cmds[i])
	}
	_, err := pipe.Exec(ctx)
	return cmds, err
}

func (b *redisBackend) Release(ctx context.Context, h Held) error {
	n, err := releaseScript.RunPrepared(ctx, b.auto, b.handle(h).releaseArgs[:]).Int64()
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
	sub := b.rdb.Subscribe(ctx, b.prefix+"{"+name+"}:released")
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

var _ Notifier = (*redisBackend)(nil)

// errNoRedis is returned by Redis-only features on a Client built on
// another backend.
var errNoRedis = errors.New("lease: needs the built-in Redis backend")
