package redislease

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/autopipe"
	"github.com/holdfast-go/holdfast/internal/formatver"
	"github.com/holdfast-go/holdfast/internal/luascript"
	"github.com/holdfast-go/holdfast/internal/ownerarg"
	"github.com/holdfast-go/holdfast/internal/redispolicy"
	"github.com/holdfast-go/holdfast/internal/safe"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
)

// DefaultPrefix starts every key of a Backend whose Options.Prefix is
// empty.
const DefaultPrefix = "holdfast:lease:"

// Options configure a Backend. The zero value is valid.
type Options struct {
	// Prefix starts every key. Default DefaultPrefix. It must not hold
	// '{' or '}': the lease name is the Cluster hash tag.
	Prefix string
	// ReplicaAck, when Replicas > 0, makes every acquisition wait (WAIT)
	// until that many replicas acknowledged the new key, for at most
	// Timeout (default 100 ms). An acquisition not acknowledged in time is
	// released and fails with *NotReplicatedError. This narrows, but does
	// not close, the window in which a Sentinel or Cluster failover loses
	// a lease: replication stays asynchronous.
	ReplicaAck ReplicaAck
	// Eviction: the zero value reads maxmemory-policy (CONFIG GET, once,
	// before the first acquisition) and refuses a Redis that may evict
	// keys with ErrEvictionPolicy, one that refuses CONFIG GET with
	// ErrEvictionPolicyUnknown; see Eviction for declaring the policy or
	// running anyway.
	Eviction Eviction
	// Holder is the holder label (lease.Options.Holder) the acquire script
	// stores beside each lease it grants, in the key Keys.Holder, in
	// the same round trip. Default "" (none; the key is not written, and
	// Inspect shows no label).
	Holder string
	// IdleCounterTTL bounds how long a lease's fence counter (Keys.Fence)
	// and holder label (Keys.Holder) are kept after its last acquisition:
	// each acquisition sets them to expire after IdleCounterTTL, so a
	// lease name not acquired for that long leaves no key (Redisson's
	// counters grow without bound: its issue #6510). Default 0: kept for
	// ever. When set it must be at least MinIdleCounterTTL (1 h), else
	// NewBackend returns ErrInvalidOptions.
	//
	// Safe under one assumption: the Redis server's clock never steps back
	// by more than IdleCounterTTL. A counter idle that long is not needed:
	// the next token is max(counter+1, server time in µs), and the last
	// token issued was at most the server time of its acquisition (plus
	// the acquisitions of the same microsecond), IdleCounterTTL ago. A
	// clock stepped back further would issue a token a sink has already
	// seen, and the sink would refuse the new holder's writes as stale
	// until the clock caught up (docs/operations.md, "Retention and
	// growth"). Joined claims (the Redis ledger's ClaimAll) keep the
	// counters of the leases they take for ever.
	IdleCounterTTL time.Duration
}

// MinIdleCounterTTL is the smallest Options.IdleCounterTTL (1 h): the
// largest step back of a Redis server's clock the option assumes.
const MinIdleCounterTTL = time.Hour

// Backend is the lease Backend on one Redis deployment: a single
// server, a Sentinel-managed primary or a Cluster, through any
// redis.UniversalClient. It owns the key layout (Keys), the scripts of
// this package, a pipeline per renewal batch, the pub/sub hand-off to
// waiters (Notifier, WaitingAcquirer) and the replica acknowledgements
// (Options.ReplicaAck). lease.New builds a Client on one; NewBackend
// builds one for lease.NewWithBackend or for a package that keeps keys beside
// the lease's (election). It is safe for concurrent use.
type Backend struct {
	rdb    redis.UniversalClient
	auto   *autopipe.Pipe // acquire and release calls, batched when concurrent
	prefix string
	ack    ReplicaAck
	policy *redispolicy.Checker     // maxmemory-policy, read before the first acquisition
	holder string                   // Options.Holder
	label  any                      // holder, boxed once for the acquire script's arguments
	idle   any                      // Options.IdleCounterTTL in ms (0: none), boxed once likewise
	ttlArg atomic.Pointer[boxedTTL] // the last TTL argument built, reused by the next acquisition of that TTL
	format formatver.Gate           // the stored format, checked before the first acquisition
}

// store names the package in format markers and errors.
const store = "lease/redislease"

// boxedTTL is a TTL argument in ms, boxed once: a Client's leases mostly
// share one TTL, and each acquisition would otherwise allocate its box.
type boxedTTL struct {
	ms  int64
	arg any
}

// ttlArgument returns ttl's argument (ms) as the scripts take it.
func (b *Backend) ttlArgument(ttl time.Duration) any {
	ms := ttl.Milliseconds()
	if p := b.ttlArg.Load(); p != nil && p.ms == ms {
		return p.arg
	}
	p := &boxedTTL{ms: ms, arg: ms}
	b.ttlArg.Store(p)
	return p.arg
}

// NewBackend returns the backend over rdb. It returns
// leasedriver.ErrNilClient (which matches lease.ErrInvalidOptions) for a
// nil rdb (a typed nil pointer too) and an error matching
// lease.ErrInvalidOptions for a Prefix holding '{' or '}', a negative
// ReplicaAck, an Eviction.Policy that is not a Redis policy, a Holder
// that leasedriver.CheckHolder refuses or an IdleCounterTTL below
// MinIdleCounterTTL. It starts no goroutine and sends nothing: the
// eviction policy is read on the first acquisition.
func NewBackend(rdb redis.UniversalClient, opts Options) (*Backend, error) {
	if safe.IsNil(rdb) {
		return nil, leasedriver.ErrNilClient
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if strings.ContainsAny(opts.Prefix, "{}") {
		return nil, fmt.Errorf("%w: Prefix %q must not hold '{' or '}'", leasedriver.ErrInvalidOptions, opts.Prefix)
	}
	if opts.ReplicaAck.Replicas < 0 || opts.ReplicaAck.Timeout < 0 {
		return nil, fmt.Errorf("%w: negative ReplicaAck", leasedriver.ErrInvalidOptions)
	}
	if opts.ReplicaAck.Replicas > 0 && opts.ReplicaAck.Timeout == 0 {
		opts.ReplicaAck.Timeout = 100 * time.Millisecond
	}
	if err := opts.Eviction.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", leasedriver.ErrInvalidOptions, err)
	}
	if err := leasedriver.CheckHolder(opts.Holder); err != nil {
		return nil, err
	}
	if opts.IdleCounterTTL != 0 && opts.IdleCounterTTL < MinIdleCounterTTL {
		return nil, fmt.Errorf("%w: IdleCounterTTL %v: 0 (keep for ever) or at least %v", leasedriver.ErrInvalidOptions, opts.IdleCounterTTL, MinIdleCounterTTL)
	}
	return &Backend{rdb: rdb, auto: autopipe.New(rdb), prefix: opts.Prefix, ack: opts.ReplicaAck,
		policy: redispolicy.New(rdb, opts.Eviction, "lease.Options.Eviction (redislease.Options.Eviction)"),
		holder: opts.Holder, label: opts.Holder, idle: opts.IdleCounterTTL.Milliseconds()}, nil
}

// CheckPolicy reads the Redis's maxmemory-policy unless done before (see
// Options.Eviction): nil when it keeps every key or eviction is
// allowed, an error matching ErrEvictionPolicy or
// ErrEvictionPolicyUnknown when refused, or the read's I/O error. Every
// acquisition calls it first; a package that takes leases in scripts of
// its own (Joinable) calls it before them.
func (b *Backend) CheckPolicy(ctx context.Context) error {
	if err := leasedriver.CheckContext(ctx); err != nil {
		return err
	}
	return b.policy.Check(ctx)
}

// CheckFormat checks the stored format unless done before: nil when the
// marker key Prefix + "format" holds "holdfast lease/redislease format 1"
// (written there when missing), a *fence.FormatError (matching
// fence.ErrUnknownFormat) when it holds anything else: a newer build's
// format or another store's keys under this prefix (docs/compatibility.md).
// Every acquisition calls it first (the views, Inspect and List, check
// the marker without writing it); a package that takes
// leases in scripts of its own (Joinable) calls it before them. On a
// Cluster the marker is one key, on one shard.
func (b *Backend) CheckFormat(ctx context.Context) error {
	if err := leasedriver.CheckContext(ctx); err != nil {
		return err
	}
	if b.format.Passed() {
		return nil
	}
	return b.format.Check(ctx, func(ctx context.Context) error {
		return formatver.Redis(ctx, b.rdb, store, b.prefix)
	})
}

// Evictions implements EvictionCounter: the keys Redis evicted since the
// previous call (INFO stats evicted_keys, over every master), read only
// when Options.Eviction.AllowEviction let the backend run on a Redis
// that may evict keys; 0 without I/O otherwise.
func (b *Backend) Evictions(ctx context.Context) (int64, error) {
	if err := leasedriver.CheckContext(ctx); err != nil {
		return 0, err
	}
	return b.policy.Evictions(ctx)
}

var _ leasedriver.Labeled = (*Backend)(nil)

// HolderLabel implements Labeled: Options.Holder.
func (b *Backend) HolderLabel() string { return b.holder }

// IdleCounterTTL is Options.IdleCounterTTL (0: none): a script that takes
// the backend's leases itself (redisledger's joined claim) sets their fence
// counters and holder labels to expire after it, as Acquire does.
func (b *Backend) IdleCounterTTL() time.Duration {
	ms, _ := b.idle.(int64)
	return time.Duration(ms) * time.Millisecond
}

// Evicting reports whether the backend runs on a Redis that may evict
// keys, allowed by Options.Eviction.AllowEviction: only then does the
// Client read Evictions on its renewal passes.
func (b *Backend) Evicting() bool { return b.policy.Evicting() }

// Redis returns the client the backend sends its commands through.
func (b *Backend) Redis() redis.UniversalClient { return b.rdb }

// Keys are the Redis keys of one lease. All carry the hash tag
// {name}, so they live in one Cluster slot: a package keeping keys beside
// the lease (election's leader record) puts them under Tagged.
type Keys struct {
	// Lease holds the owner (a string) while the lease is held, with the
	// lease's TTL: Prefix + "{" + name + "}".
	Lease string
	// Fence holds the last token issued for name (an integer; no TTL, or
	// Options.IdleCounterTTL from the last acquisition):
	// Lease + ":fence".
	Fence string
	// Waiting is the flag a waiting Acquire sets so that the release
	// publishes on Released: Lease + ":waiting".
	Waiting string
	// Holder holds the holder label (Options.Holder) of the last
	// acquisition that had one, with its token: "<token> <label>" (a
	// string, no TTL): Lease + ":holder". Written by every labelled
	// acquisition in its own script (the acquire script builds it from
	// Lease, in the same hash tag); Inspect shows the label only when its
	// token is the fence counter's, so it names the current holder while
	// the lease is held, or none.
	Holder string
	// Released is the pub/sub channel a release publishes on:
	// Lease + ":released".
	Released string
}

// Tagged returns the key Lease + ":" + suffix, in the lease's hash slot.
// The lease's own keys are Tagged("fence"), Tagged("waiting") and
// Tagged("holder"), and its release channel Tagged("released"): a key of
// another package under Tagged takes another suffix (election's are
// "leader" and "elected"), or it overwrites the lease's token counter or
// flags.
func (k Keys) Tagged(suffix string) string { return k.Lease + ":" + suffix }

// Keys returns the keys of the lease called name. The name is checked as
// lease.Client.TryAcquire checks it (lease.ErrInvalidName for an empty name, one
// longer than leasedriver.MaxNameLen, one holding '{' or '}', or one that is not
// UTF-8 without control characters): a brace would move the hash tag,
// and the keys of one lease would land in different slots.
func (b *Backend) Keys(name string) (Keys, error) {
	if err := leasedriver.CheckName(name); err != nil {
		return Keys{}, err
	}
	lk := b.prefix + "{" + name + "}"
	return Keys{Lease: lk, Fence: lk + ":fence", Waiting: lk + ":waiting", Holder: lk + ":holder", Released: lk + ":released"}, nil
}

// LeaseKey is Keys(name).Lease, built alone (one string where Keys builds
// five): for a caller that passes a script the lease's key and lets it
// derive the others (the Redis ledger's joined claim and finish). Errors
// as Keys.
func (b *Backend) LeaseKey(name string) (string, error) {
	if err := leasedriver.CheckName(name); err != nil {
		return "", err
	}
	return b.prefix + "{" + name + "}", nil
}

// redisHandle is the built-in backend's Grant.Handle: the keys and
// arguments of one acquisition, built and boxed once at acquire and reused
// by its renewals and its release. Each script's command is prepared in
// full (EVALSHA, sha, key count, keys, arguments), so a call allocates only
// its redis.Cmd, where redis.Script.Run would build and box all of it
// again. A handle is never modified after newHandle, so calls may share
// it.
type redisHandle struct {
	name, owner string
	acquireArgs [9]any // evalsha sha 2 lease fence owner ttl label idle
	acquireN    int    // the acquireArgs sent: 7 when label and idle are the defaults (acquire.lua reads them absent as such)
	renewArgs   [6]any // evalsha sha 1 lease owner ttl
	releaseArgs [6]any // evalsha sha 2 lease waiting owner
}

func (b *Backend) newHandle(name, owner string, ttl time.Duration) *redisHandle {
	// One allocation for the three keys: the lease key is a prefix of the
	// fence key, and the waiting flag follows it in the same string. The
	// release channel and the holder label's key are built by the scripts
	// (each boxed key or argument costs an allocation per acquisition).
	n := len(b.prefix) + len(name) + len("{}")
	keys := b.prefix + "{" + name + "}:fence" + b.prefix + "{" + name + "}:waiting"
	var (
		leaseArg   any = keys[:n]
		fenceArg   any = keys[:n+len(":fence")]
		waitingArg any = keys[n+len(":fence"):]
		ownerArg   any = ownerarg.Owner(owner) // sent as is, printed as [owner]
		ttlArg         = b.ttlArgument(ttl)
	)
	sent := 9
	if b.holder == "" && b.IdleCounterTTL() == 0 {
		sent = 7 // two arguments fewer to send and for the server to convert
	}
	return &redisHandle{
		name:        name,
		owner:       owner,
		acquireN:    sent,
		acquireArgs: [...]any{cmdEvalSha, acquireScript.SHA(), 2, leaseArg, fenceArg, ownerArg, ttlArg, b.label, b.idle},
		renewArgs:   [...]any{cmdEvalSha, renewScript.SHA(), 1, leaseArg, ownerArg, ttlArg},
		releaseArgs: [...]any{cmdEvalSha, releaseScript.SHA(), 2, leaseArg, waitingArg, ownerArg},
	}
}

// handle returns the handle of a held lease, building it when the Held
// carries none (an acquisition of another Client, or another backend's).
func (b *Backend) handle(h leasedriver.Held) *redisHandle {
	if rh, ok := h.Handle.(*redisHandle); ok && rh.owner == h.Owner && rh.name == h.Name {
		return rh
	}
	return b.newHandle(h.Name, h.Owner, h.TTL)
}

func (b *Backend) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (leasedriver.Grant, error) {
	if err := leasedriver.CheckContext(ctx); err != nil {
		return leasedriver.Grant{}, err
	}
	h := b.newHandle(name, owner, ttl)
	return b.acquire(ctx, h, ttl, h.acquireArgs[:h.acquireN])
}

var _ leasedriver.WaitingAcquirer = (*Backend)(nil)

// AcquireWaiting implements WaitingAcquirer: Acquire, flagging a held
// lease as waited for (acquire.lua's KEYS[3]) for flagTTL, so that its
// release publishes.
func (b *Backend) AcquireWaiting(ctx context.Context, name, owner string, ttl, flagTTL time.Duration) (leasedriver.Grant, error) {
	if err := leasedriver.CheckContext(ctx); err != nil {
		return leasedriver.Grant{}, err
	}
	h := b.newHandle(name, owner, ttl)
	a, waitingKey := &h.acquireArgs, h.releaseArgs[4]
	// evalsha sha 3 lease fence waiting owner ttl label idle flagTTL
	args := [...]any{a[0], a[1], 3, a[3], a[4], waitingKey, a[5], a[6], a[7], a[8], max(flagTTL.Milliseconds(), 1)}
	return b.acquire(ctx, h, ttl, args[:])
}

func (b *Backend) acquire(ctx context.Context, h *redisHandle, ttl time.Duration, args []any) (leasedriver.Grant, error) {
	if err := ctx.Err(); err != nil {
		return leasedriver.Grant{}, err // nothing sent, nothing to undo
	}
	if err := b.policy.Check(ctx); err != nil {
		return leasedriver.Grant{}, err // nothing sent, nothing to undo
	}
	if err := b.CheckFormat(ctx); err != nil {
		return leasedriver.Grant{}, err // nothing sent, nothing to undo
	}
	// One integer, not an array: the reply costs no slices.
	res, err := acquireScript.RunPrepared(ctx, b.auto, args).Int64()
	if err != nil {
		// The script may have run (a reply lost or late, ctx ended while
		// the call was on the wire): a key left with this owner would
		// block every other owner until its TTL.
		b.undo(ctx, []*redisHandle{h}, ttl)
		return leasedriver.Grant{}, redispolicy.MemoryFull(err)
	}
	if res <= 0 {
		return leasedriver.Grant{Remaining: time.Duration(-res) * time.Millisecond}, nil
	}
	if err := b.waitReplicas(ctx, h, ttl); err != nil {
		return leasedriver.Grant{}, err
	}
	return leasedriver.Grant{Acquired: true, Token: fence.Token(res), Handle: h}, nil
}

var _ leasedriver.BatchAcquirer = (*Backend)(nil)

// AcquireAll implements BatchAcquirer: one pipeline of acquire scripts.
// Commands the server refused with NOSCRIPT (a node that lost its script
// cache) run again with EVAL; the others are not sent again by this code.
// Should go-redis re-send the pipeline (a lost reply, TRYAGAIN on a
// Cluster), the acquire script answers an acquisition it already granted
// to the same owner with the same token.
func (b *Backend) AcquireAll(ctx context.Context, reqs []leasedriver.AcquireRequest) ([]leasedriver.Grant, []error) {
	if err := leasedriver.CheckContext(ctx); err != nil {
		return make([]leasedriver.Grant, len(reqs)), leasedriver.Errs(len(reqs), err)
	}
	err := b.policy.Check(ctx)
	if err == nil {
		err = b.CheckFormat(ctx)
	}
	if err != nil {
		errs := make([]error, len(reqs))
		for i := range errs {
			errs[i] = err
		}
		return make([]leasedriver.Grant, len(reqs)), errs
	}
	handles := make([]*redisHandle, len(reqs))
	cmds := make([]*redis.Cmd, len(reqs))
	pipe := b.rdb.Pipeline()
	for i, r := range reqs {
		handles[i] = b.newHandle(r.Name, r.Owner, r.TTL)
		cmds[i] = acquireScript.Cmd(ctx, handles[i].acquireArgs[:handles[i].acquireN])
		_ = pipe.Process(ctx, cmds[i])
	}
	_, _ = pipe.Exec(ctx) // errors are read per command
	grants, errs := make([]leasedriver.Grant, len(reqs)), make([]error, len(reqs))
	var failed []*redisHandle
	var ttl time.Duration
	replies := acquireScript.Replies()
	for i, cmd := range cmds {
		res, err := replies.Fallback(ctx, b.rdb, cmd).Int64()
		switch {
		case err != nil:
			errs[i] = redispolicy.MemoryFull(err)
			failed = append(failed, handles[i])
			ttl = max(ttl, reqs[i].TTL)
		case res <= 0:
			grants[i] = leasedriver.Grant{Remaining: time.Duration(-res) * time.Millisecond}
		default:
			if err := b.waitReplicas(ctx, handles[i], reqs[i].TTL); err != nil {
				errs[i] = err
				continue
			}
			grants[i] = leasedriver.Grant{Acquired: true, Token: fence.Token(res), Handle: handles[i]}
		}
	}
	b.undo(ctx, failed, ttl) // as in acquire
	return grants, errs
}

// undo deletes the keys of failed acquisitions that may have been taken,
// where they hold the acquisition's owner (release.lua), in one round trip,
// on a best effort: it runs without ctx's cancellation (the caller may
// have gone), bounded by ttl (the keys are gone by then anyway).
func (b *Backend) undo(ctx context.Context, hs []*redisHandle, ttl time.Duration) {
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
	replies := releaseScript.Replies()
	for _, cmd := range cmds {
		_ = replies.Fallback(rctx, b.rdb, cmd).Err()
	}
}

func (b *Backend) Renew(ctx context.Context, batch []leasedriver.Held) []error {
	if err := leasedriver.CheckContext(ctx); err != nil {
		return leasedriver.Errs(len(batch), err)
	}
	if len(batch) == 1 {
		// Lease.Renew: a plain call costs half the allocations of a
		// pipeline of one.
		n, err := renewScript.RunPrepared(ctx, b.rdb, b.handle(batch[0]).renewArgs[:]).Int64()
		if err == nil && n != 1 {
			err = leasedriver.ErrNotHeld
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
			errs[i] = leasedriver.ErrNotHeld
		}
	}
	return errs
}

func (b *Backend) pipeline(ctx context.Context, batch []leasedriver.Held) ([]*redis.Cmd, error) {
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, h := range batch {
		cmds[i] = renewScript.Cmd(ctx, b.handle(h).renewArgs[:])
		_ = pipe.Process(ctx, cmds[i])
	}
	_, err := pipe.Exec(ctx)
	return cmds, err
}

func (b *Backend) Release(ctx context.Context, h leasedriver.Held) error {
	if err := leasedriver.CheckContext(ctx); err != nil {
		return err
	}
	n, err := releaseScript.RunPrepared(ctx, b.auto, b.handle(h).releaseArgs[:]).Int64()
	if err != nil {
		return err
	}
	if n != 1 {
		return leasedriver.ErrNotHeld
	}
	return nil
}

// Released subscribes to the lease's release channel; it returns once the
// subscription is active, so a release after it is never missed.
func (b *Backend) Released(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	if err := leasedriver.CheckContext(ctx); err != nil {
		return nil, nil, err
	}
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

var _ leasedriver.Notifier = (*Backend)(nil)

var _ leasedriver.BatchReleaser = (*Backend)(nil)

// ReleaseAll implements BatchReleaser: one pipeline of release scripts.
func (b *Backend) ReleaseAll(ctx context.Context, batch []leasedriver.Held) []error {
	if err := leasedriver.CheckContext(ctx); err != nil {
		return leasedriver.Errs(len(batch), err)
	}
	errs := make([]error, len(batch))
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(batch))
	for i, h := range batch {
		cmds[i] = releaseScript.Cmd(ctx, b.handle(h).releaseArgs[:])
		_ = pipe.Process(ctx, cmds[i])
	}
	_, _ = pipe.Exec(ctx) // errors are read per command
	replies := releaseScript.Replies()
	for i, cmd := range cmds {
		n, err := replies.Fallback(ctx, b.rdb, cmd).Int64()
		switch {
		case err != nil:
			errs[i] = err
		case n != 1:
			errs[i] = leasedriver.ErrNotHeld
		}
	}
	return errs
}

// waitReplicas runs WAIT on the node that holds the lease key when
// Options.ReplicaAck asks for it, and releases the lease (as undo
// does) when fewer replicas acknowledged it.
func (b *Backend) waitReplicas(ctx context.Context, h *redisHandle, ttl time.Duration) error {
	want := b.ack.Replicas
	if want <= 0 {
		return nil
	}
	got, err := b.wait(ctx, b.prefix+"{"+h.name+"}", want)
	if err == nil && got < want {
		err = &NotReplicatedError{Name: h.name, Want: want, Got: got}
	}
	if err != nil {
		b.undo(ctx, []*redisHandle{h}, ttl)
	}
	return err
}

// wait runs WAIT want on the node of leaseKey (its master on a Cluster).
func (b *Backend) wait(ctx context.Context, leaseKey string, want int) (int, error) {
	type waiter interface {
		Wait(ctx context.Context, numReplicas int, timeout time.Duration) *redis.IntCmd
	}
	var node any = b.rdb
	if cc, ok := b.rdb.(*redis.ClusterClient); ok {
		master, err := cc.MasterForKey(ctx, leaseKey)
		if err != nil {
			return 0, fmt.Errorf("replica ack: %w", err)
		}
		node = master
	}
	w, ok := node.(waiter)
	if !ok {
		return 0, fmt.Errorf("replica ack: %T cannot run WAIT", node)
	}
	got, err := w.Wait(ctx, want, b.ack.Timeout).Result()
	if err != nil {
		return 0, fmt.Errorf("replica ack: %w", err)
	}
	return int(got), nil
}

// Joinable reports whether a script of another package sent through rdb
// may take and give back b's leases itself, in the same round trip as its
// own writes, with internal/leaselua's functions on the keys of Keys
// (leasejoin.TryAcquireAll, leasejoin.Release): rdb is the very client b
// sends through (so the keys are on the same Redis), and b waits for no
// replica acknowledgement (Options.ReplicaAck), which such a script
// cannot give.
func (b *Backend) Joinable(rdb redis.UniversalClient) bool {
	return b != nil && rdb == b.rdb && b.ack.Replicas == 0
}

// Granted returns the Grant of an acquisition of the lease called name by
// owner, for ttl, that a joined script (Joinable) took with token: its
// Handle prepares the renewals and the release as Acquire's does.
func (b *Backend) Granted(name, owner string, ttl time.Duration, token fence.Token) leasedriver.Grant {
	return leasedriver.Grant{Acquired: true, Token: token, Handle: b.newHandle(name, owner, ttl)}
}
