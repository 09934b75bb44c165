package lease

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/logattr"
	"github.com/holdfast-go/holdfast/internal/retry"
	"github.com/holdfast-go/holdfast/internal/safe"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

// Client acquires leases on one Backend (New: a Redis deployment, a single
// server, a Sentinel-managed primary or a Cluster, through any
// redis.UniversalClient) and keeps them alive in batches, from one timer
// (a renewal pass runs on a goroutine of its own while it renews). It knows
// no store: the Backend owns keys, scripts and hand-off. It is safe for
// concurrent use.
type Client struct {
	b      leasedriver.Backend
	opts   Options // opts.Holder is the backend's label (Labeled)
	log    *slog.Logger
	keeper *keeper
	ev     evictions // evictions seen (Eviction.AllowEviction)
	tr     tracing
}

// New returns a Client over rdb: NewWithBackend on redislease.NewBackend(rdb,
// redislease.Options{Prefix: opts.Prefix, ReplicaAck: opts.ReplicaAck, Eviction:
// opts.Eviction, Holder: opts.Holder}). It returns an error matching
// ErrInvalidOptions for bad options, and for a nil rdb (that error matches
// leasedriver.ErrNilClient too). It sends
// nothing: the Redis eviction policy is read before the first acquisition
// (Options.Eviction).
func New(rdb redis.UniversalClient, opts Options) (*Client, error) {
	b, err := redislease.NewBackend(rdb, redislease.Options{Prefix: opts.Prefix, ReplicaAck: opts.ReplicaAck, Eviction: opts.Eviction, Holder: opts.Holder})
	if err != nil {
		return nil, err
	}
	opts.Prefix, opts.ReplicaAck, opts.Eviction = "", redislease.ReplicaAck{}, redislease.Eviction{}
	return NewWithBackend(b, opts)
}

// NewWithBackend returns a Client over b, such as a *redislease.Backend, or
// lease/quorum's or lease/pglease's. Options.Prefix and ReplicaAck are
// the Redis backend's (New passes them on; redislease.Options sets them for
// redislease.NewBackend) and are refused here, since the backend owns its keys
// (quorum.Options.Prefix, pglease's table): ErrInvalidOptions for a nil
// backend (matching leasedriver.ErrNilClient too) and for a Prefix or a
// ReplicaAck. The holder
// label is the backend's too (Labeled: redislease.Options.Holder,
// pglease.Options.Holder): a non-empty Options.Holder other than the
// backend's is refused with ErrInvalidOptions, and so is any non-empty
// Holder over a backend that stores no label (lease/quorum: its views show
// the owner id only).
func NewWithBackend(b leasedriver.Backend, opts Options) (*Client, error) {
	if safe.IsNil(b) {
		return nil, fmt.Errorf("%w: NewWithBackend got a nil backend", leasedriver.ErrNilClient)
	}
	if opts.ReplicaAck.Replicas > 0 {
		return nil, fmt.Errorf("%w: ReplicaAck is the Redis backend's (redislease.Options)", ErrInvalidOptions)
	}
	if opts.Eviction != (redislease.Eviction{}) {
		return nil, fmt.Errorf("%w: Eviction is the Redis backend's (redislease.Options)", ErrInvalidOptions)
	}
	if opts.Prefix != "" {
		return nil, fmt.Errorf("%w: Prefix %q: the backend's keys are its own (redislease.Options.Prefix, quorum.Options.Prefix)", ErrInvalidOptions, opts.Prefix)
	}
	label := ""
	lb, labeled := b.(leasedriver.Labeled)
	if labeled {
		label = lb.HolderLabel()
	}
	if opts.Holder != "" && !labeled {
		return nil, fmt.Errorf("%w: Holder %q: the backend stores no holder label (lease/quorum keeps none: leave Holder empty; views show the owner id)", ErrInvalidOptions, opts.Holder)
	}
	if opts.Holder != "" && opts.Holder != label {
		return nil, fmt.Errorf("%w: Holder %q: the backend stores its own holder label (%q; redislease.Options.Holder, pglease.Options.Holder)", ErrInvalidOptions, opts.Holder, label)
	}
	opts.Holder = label
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	c := &Client{b: b, opts: opts, log: opts.Logger, tr: newTracing(opts.TracerProvider)}
	c.keeper = newKeeper(c)
	return c, nil
}

// ready refuses a Client not made by New or NewWithBackend, and a nil ctx.
func (c *Client) ready(ctx context.Context) error {
	if c == nil || c.keeper == nil {
		return ErrNotCreated
	}
	if ctx == nil {
		return ErrNilContext
	}
	return nil
}

// TryAcquire makes one attempt (one round trip) to take the lease called
// name for ttl. ctx bounds the call and lends its values to
// Lease.Context, not its cancellation: the returned Lease is kept alive
// until it is released or lost, or until the context of WithLifetime ends.
//
// A grant that arrives at or after ttl - leasedriver.Drift(ttl) (1% of ttl + 2 ms) from the call's start
// is not handed out: its trust window has already ended.
//
// Errors: *NotAcquiredError (matches ErrNotAcquired) when another owner
// holds it; *leasedriver.SlowAcquireError (matches ErrSlowAcquire) for a grant that
// came too late; ErrInvalidName, ErrInvalidTTL for bad input;
// *NotReplicatedError with Options.ReplicaAck; Redis errors as returned by
// go-redis, joined with ctx's error when ctx ended. After a slow grant or
// a Redis error (the script may have run) the key is deleted if it holds
// this attempt's owner, on a best effort bounded by ttl, before the call
// returns.
func (c *Client) TryAcquire(ctx context.Context, name string, ttl time.Duration, opts ...AcquireOption) (*Lease, error) {
	if err := c.readyToAcquire(ctx, name, ttl); err != nil {
		return nil, err
	}
	return c.try(ctx, newAcquireConfig(opts), name, ttl, false)
}

// Acquire takes the lease called name for ttl, waiting while another owner
// holds it until ctx ends. A waiter is woken by the holder's Release (Redis
// pub/sub) and otherwise retries when the holder's remaining TTL runs out,
// bounded by Options.RetryMin and RetryMax, with jitter. Each wake-up costs
// one round trip. ctx bounds the wait only (and lends its values to
// Lease.Context): the lease lives until Release or loss, or until the
// context of WithLifetime ends, as with bsm/redislock, redsync and etcd's
// Mutex.Lock.
//
//	wait, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
//	defer cancel()
//	l, err := c.Acquire(wait, "report", 30*time.Second, lease.WithLifetime(appCtx))
//
// A grant that came too late to use (see TryAcquire) was undone, and the
// lease is likely free: Acquire tries again (from the second such grant on,
// after RetryMin, jittered), as Redisson's tryLock with a wait time does,
// rather than fail a caller who asked to wait.
//
// Errors: as TryAcquire, except that a held lease or a grant too slow to
// use makes it wait and try again; when ctx ends first it returns ctx's
// error wrapped with the last *NotAcquiredError or *leasedriver.SlowAcquireError, so
// both errors.Is(err, context.DeadlineExceeded) and errors.Is(err,
// ErrNotAcquired) (or ErrSlowAcquire) hold.
func (c *Client) Acquire(ctx context.Context, name string, ttl time.Duration, opts ...AcquireOption) (*Lease, error) {
	if err := c.readyToAcquire(ctx, name, ttl); err != nil {
		return nil, err
	}
	cfg := newAcquireConfig(opts)
	l, err := c.try(ctx, cfg, name, ttl, false)
	if _, again := retryAfter(err); !again {
		return l, err
	}
	// Listen before the next try, so a release between the two is not
	// missed; the tries from then on flag the holding as waited for, so
	// that its release notifies. Without a Notifier (or pub/sub refused by
	// a proxy), poll.
	var released <-chan struct{}
	if n, ok := c.b.(leasedriver.Notifier); ok {
		if ch, stop, err := n.Released(ctx, name); err == nil {
			defer stop()
			released = ch
		}
	}
	waiting := released != nil
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	last := err // the latest *NotAcquiredError or *leasedriver.SlowAcquireError
	for {
		l, err = c.try(ctx, cfg, name, ttl, waiting)
		if cerr := ctx.Err(); cerr != nil && errors.Is(err, cerr) {
			// ctx ended as this try went out: the wait ran out, as
			// when it ends between two tries.
			return nil, fmt.Errorf("%w: %w", cerr, last)
		}
		remaining, again := retryAfter(err)
		if !again {
			return l, err
		}
		last = err
		timer.Reset(c.backoff(remaining))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ctx.Err(), err)
		case <-released:
		case <-timer.C:
		}
	}
}

// retryAfter reports whether a blocked Acquire tries again after err, and
// the holder's remaining TTL to wait for: a held lease (its remaining
// TTL), or a grant that came too late to use (0: the next try waits
// RetryMin).
func retryAfter(err error) (time.Duration, bool) {
	var held *NotAcquiredError
	switch {
	case errors.As(err, &held):
		return held.RemainingTTL, true
	case errors.Is(err, ErrSlowAcquire):
		return 0, true
	}
	return 0, false
}

// backoff returns the wait before the next attempt: the holder's remaining
// TTL clamped to [RetryMin, RetryMax], then jittered into [d/2, d]
// (internal/retry) so that waiters spread out.
func (c *Client) backoff(remaining time.Duration) time.Duration {
	return retry.Jitter(min(max(remaining, c.opts.RetryMin), c.opts.RetryMax), 0.5, 0, nil)
}

// TryAcquireAll is TryAcquire for each of names, all for ttl, in one round
// trip on the built-in Redis backend (one pipeline; one per node on a
// Cluster; with Options.ReplicaAck, one more WAIT per lease taken), and one
// after another on a backend without batches. leases[i] and errs[i]
// answer names[i], with TryAcquire's errors; an invalid ttl, a nil ctx or
// a Client not made by New fails every name. A name listed twice is taken once: the later copy gets
// *NotAcquiredError (the earlier one holds it). Each lease's trust window
// starts when the batch was sent, so a batch answered at or after
// ttl - leasedriver.Drift(ttl) gives every name *leasedriver.SlowAcquireError. ctx and opts apply
// as in TryAcquire. A scheduler claiming many (job, partition) leases at a
// second's boundary uses it.
func (c *Client) TryAcquireAll(ctx context.Context, names []string, ttl time.Duration, opts ...AcquireOption) (leases []*Lease, errs []error) {
	acquire := func(ctx context.Context, reqs []leasedriver.AcquireRequest) ([]leasedriver.Grant, []error) {
		if ba, ok := c.b.(leasedriver.BatchAcquirer); ok {
			return ba.AcquireAll(ctx, reqs)
		}
		grants, errs := make([]leasedriver.Grant, len(reqs)), make([]error, len(reqs))
		for j, r := range reqs {
			grants[j], errs[j] = c.b.Acquire(ctx, r.Name, r.Owner, r.TTL)
		}
		return grants, errs
	}
	return c.tryAcquireAllWith(ctx, names, ttl, acquire, opts...)
}

// tryAcquireAllWith is TryAcquireAll with the batch's acquisitions made
// by acquire instead of the backend's AcquireAll: lease/leasejoin's
// TryAcquireAll, which documents it.
func (c *Client) tryAcquireAllWith(ctx context.Context, names []string, ttl time.Duration, acquire func(context.Context, []leasedriver.AcquireRequest) ([]leasedriver.Grant, []error), opts ...AcquireOption) (leases []*Lease, errs []error) {
	leases, errs = make([]*Lease, len(names)), make([]error, len(names))
	err := c.ready(ctx)
	if err == nil {
		err = leasedriver.CheckTTL(ttl)
	}
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return leases, errs
	}
	reqs := make([]leasedriver.AcquireRequest, 0, len(names))
	at := make([]int, 0, len(names)) // reqs[j] answers names[at[j]]
	for i, name := range names {
		if errs[i] = leasedriver.CheckName(name); errs[i] != nil {
			continue
		}
		owner, err := newOwner()
		if err != nil {
			errs[i] = err
			continue
		}
		reqs = append(reqs, leasedriver.AcquireRequest{Name: name, Owner: owner, TTL: ttl})
		at = append(at, i)
	}
	if len(reqs) == 0 {
		return leases, errs
	}
	sctx, span := c.startAcquireAll(ctx, reqs)
	defer func() { endAcquireAll(span, leases, errs) }()
	start := time.Now()
	grants, gerrs := acquire(sctx, reqs)
	took := time.Since(start)
	cfg := newAcquireConfig(opts)
	if took >= ttl-drift(ttl) {
		// The whole batch came too late: undo its grants together.
		var undo []leasedriver.Held
		for j, r := range reqs {
			if gerrs[j] == nil && grants[j].Acquired {
				undo = append(undo, leasedriver.Held{Name: r.Name, Owner: r.Owner, TTL: ttl, Handle: grants[j].Handle})
				errs[at[j]] = c.slow(ctx, r.Name, r.Owner, ttl, took)
				c.opts.Observer.ObserveAcquire(r.Name, errs[at[j]], took)
				continue
			}
			leases[at[j]], errs[at[j]] = c.granted(ctx, cfg, r.Name, r.Owner, ttl, start, took, grants[j], gerrs[j])
		}
		c.undoAll(ctx, undo)
		return leases, errs
	}
	for j, r := range reqs {
		leases[at[j]], errs[at[j]] = c.granted(ctx, cfg, r.Name, r.Owner, ttl, start, took, grants[j], gerrs[j])
	}
	return leases, errs
}

// try makes one attempt; waiting: a blocked Acquire's, listening for the
// release.
func (c *Client) try(ctx context.Context, cfg acquireConfig, name string, ttl time.Duration, waiting bool) (*Lease, error) {
	owner, err := newOwner()
	if err != nil {
		return nil, err
	}
	sctx, span := c.startAcquire(ctx, name)
	start := time.Now()
	var g leasedriver.Grant
	if wa, ok := c.b.(leasedriver.WaitingAcquirer); ok && waiting {
		g, err = wa.AcquireWaiting(sctx, name, owner, ttl, c.flagTTL())
	} else {
		g, err = c.b.Acquire(sctx, name, owner, ttl)
	}
	l, err := c.granted(ctx, cfg, name, owner, ttl, start, time.Since(start), g, err)
	endAcquire(span, l, err)
	return l, err
}

// maxFlagTTL bounds the waiting flag of a Client whose RetryMax is very
// long (Redis refuses an expiry past the year 292277026596).
const maxFlagTTL = 24 * time.Hour

// flagTTL is how long a waiting try flags the lease as waited for: twice
// RetryMax, the longest wait before the next try (which sets it again),
// at most maxFlagTTL.
func (c *Client) flagTTL() time.Duration {
	return min(c.opts.RetryMax, maxFlagTTL/2) * 2
}

// granted turns the answer to an acquisition sent at start into a Lease or
// an error. A grant answered at or after the end of its trust window is
// undone: its token is never handed out.
func (c *Client) granted(ctx context.Context, cfg acquireConfig, name, owner string, ttl time.Duration, start time.Time, took time.Duration, g leasedriver.Grant, err error) (*Lease, error) {
	if errors.Is(err, leasedriver.ErrNotTried) {
		return nil, err
	}
	if err != nil {
		// A backend's own slow-grant error (lease/quorum) stays matchable
		// with ErrSlowAcquire through the wrap.
		err = safe.JoinCtx(ctx, fmt.Errorf("lease %q: acquire: %w", name, err))
		c.opts.Observer.ObserveAcquire(name, err, took)
		return nil, err
	}
	if !g.Acquired {
		err := &NotAcquiredError{Name: name, RemainingTTL: g.Remaining}
		c.opts.Observer.ObserveAcquire(name, err, took)
		return nil, err
	}
	if took >= ttl-drift(ttl) {
		err := c.slow(ctx, name, owner, ttl, took)
		c.opts.Observer.ObserveAcquire(name, err, took)
		c.undo(ctx, leasedriver.Held{Name: name, Owner: owner, TTL: ttl, Handle: g.Handle})
		return nil, err
	}
	c.opts.Observer.ObserveAcquire(name, nil, took)
	l := newLease(ctx, cfg.lifetime, c, name, owner, g, ttl, start)
	if c.log.Enabled(ctx, slog.LevelInfo) { // the attributes cost allocations
		c.log.LogAttrs(ctx, slog.LevelInfo, "lease_acquired",
			slog.String("lease", name), slog.String("owner_id", fence.OwnerID(owner)),
			slog.String("holder", c.opts.Holder),
			slog.Uint64("token", uint64(l.token)), logattr.Duration("ttl", ttl))
	}
	return l, nil
}

// slow logs and returns the error of a grant that came too late.
func (c *Client) slow(ctx context.Context, name, owner string, ttl, took time.Duration) error {
	c.log.LogAttrs(ctx, slog.LevelWarn, "lease_acquire_too_slow",
		slog.String("lease", name), slog.String("owner_id", fence.OwnerID(owner)),
		slog.String("holder", c.opts.Holder), logattr.Duration("took", took), logattr.Duration("ttl", ttl))
	return &leasedriver.SlowAcquireError{Name: name, Took: took, TTL: ttl}
}

// undo deletes the key of an acquisition that will not be used if it still
// holds its owner, on a best effort: the caller may have gone (ctx ended),
// so it runs without ctx's cancellation, bounded by the TTL (the key is
// gone by then anyway).
func (c *Client) undo(ctx context.Context, h leasedriver.Held) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), h.TTL)
	defer cancel()
	_ = c.b.Release(rctx, h)
}

// undoAll is undo for the grants of a batch: one call to a
// BatchReleaser, one Release after another on other backends.
func (c *Client) undoAll(ctx context.Context, hs []leasedriver.Held) {
	if len(hs) == 0 {
		return
	}
	if br, ok := c.b.(leasedriver.BatchReleaser); ok {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hs[0].TTL)
		defer cancel()
		_ = br.ReleaseAll(rctx, hs)
		return
	}
	for _, h := range hs {
		c.undo(ctx, h)
	}
}

// newOwner returns a random 128-bit owner value in hex.
func newOwner() (string, error) {
	var b [16]byte
	if _, err := crand.Read(b[:]); err != nil {
		return "", fmt.Errorf("lease: owner: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// readyToAcquire refuses what TryAcquire and Acquire refuse before any
// round trip: a Client not made by New, a nil ctx, a bad name or ttl.
func (c *Client) readyToAcquire(ctx context.Context, name string, ttl time.Duration) error {
	if err := c.ready(ctx); err != nil {
		return err
	}
	if err := leasedriver.CheckName(name); err != nil {
		return err
	}
	return leasedriver.CheckTTL(ttl)
}
