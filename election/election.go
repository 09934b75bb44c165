package election

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/internal/ownerarg"
	"github.com/holdfast-go/holdfast/internal/safe"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/leasejoin"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

// Defaults for Options.
const (
	// DefaultTTL is the TTL of the leadership lease (10 s): a leader that
	// stops is replaced about this long after its last renewal.
	DefaultTTL = 10 * time.Second
	// DefaultObservePoll caps the wait between two reads of an Observe
	// that has seen no election announcement (1 s).
	DefaultObservePoll = time.Second
)

var (
	// ErrNilClient is returned by New for a nil *lease.Client.
	ErrNilClient = errors.New("election: nil lease client")
	// ErrInvalidOptions is returned by New for out-of-range Options, and
	// for a lease client whose backend is no *redislease.Backend.
	ErrInvalidOptions = fmt.Errorf("election: %w", errfamily.ErrInvalidOptions)
	// ErrNoLeader is returned by Leader when no candidate leads.
	ErrNoLeader = errors.New("election: no leader")
	// ErrNotCreated is returned by the methods of a nil Election, or of
	// one not made by New (a zero Election{}).
	ErrNotCreated = fmt.Errorf("election: %w", errfamily.ErrNotCreated)
)

// ready refuses an Election not made by New, and a nil ctx
// (lease.ErrNilContext).
func (e *Election) ready(ctx context.Context) error {
	if e == nil || e.c == nil || e.rdb == nil {
		return ErrNotCreated
	}
	if ctx == nil {
		return lease.ErrNilContext
	}
	return nil
}

// Options configure an Election.
type Options struct {
	// TTL is the leadership lease's TTL, kept alive by the lease client
	// (renewed every TTL/3). Default DefaultTTL; at least leasedriver.MinTTL.
	TTL time.Duration
	// ObservePoll caps the wait between two reads of a blocked Observe.
	// Observe is woken at once by an election; the poll covers a missed
	// announcement. Default DefaultObservePoll.
	ObservePoll time.Duration
}

func (o Options) withDefaults() Options {
	if o.TTL == 0 {
		o.TTL = DefaultTTL
	}
	if o.ObservePoll == 0 {
		o.ObservePoll = DefaultObservePoll
	}
	return o
}

func (o Options) validate() error {
	if o.TTL < leasedriver.MinTTL {
		return fmt.Errorf("%w: TTL %v, at least %v", lease.ErrInvalidTTL, o.TTL, leasedriver.MinTTL)
	}
	if o.ObservePoll < 0 {
		return fmt.Errorf("%w: negative ObservePoll %v", ErrInvalidOptions, o.ObservePoll)
	}
	return nil
}

// Election is one named election on a lease.Client on the Redis backend
// (lease.New, or lease.NewWithBackend with a *redislease.Backend): the
// leader record lives beside the lease's keys, in the layout the backend
// gives (redislease.Backend.Keys). Candidates in any number of processes
// that use the same name, key prefix and Redis take part in the same
// election. It is safe for concurrent use.
type Election struct {
	c    *lease.Client
	rdb  redis.UniversalClient
	name string
	opts Options

	leaseKey, recordKey, channel string
}

// New returns the election called name on c. The lease it campaigns for
// is called name too. Errors: ErrNilClient; an error matching
// lease.ErrInvalidName for a bad name (as redislease.Backend.Keys checks
// it); ErrInvalidOptions for a Client on another backend than
// *redislease.Backend or out-of-range options; lease.ErrInvalidTTL.
func New(c *lease.Client, name string, opts Options) (*Election, error) {
	if c == nil {
		return nil, ErrNilClient
	}
	rb, ok := leasejoin.Backend(c).(*redislease.Backend)
	if !ok {
		return nil, fmt.Errorf("%w: the lease client's backend is %T, not *redislease.Backend", ErrInvalidOptions, leasejoin.Backend(c))
	}
	keys, err := rb.Keys(name)
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	return &Election{
		c: c, rdb: rb.Redis(), name: name, opts: opts,
		leaseKey:  keys.Lease,
		recordKey: keys.Tagged("leader"),
		channel:   keys.Tagged("elected"),
	}, nil
}

// Name returns the election's name.
func (e *Election) Name() string {
	if e == nil {
		return ""
	}
	return e.name
}

// Campaign blocks until this candidate is elected, then returns its
// Leadership, announcing value to observers (Leader, Observe). Waiting
// costs what lease.Client.Acquire costs: a wake-up when the leader
// resigns, otherwise a retry when its lease runs out.
//
// As with lease.Client.Acquire, ctx bounds the wait (the campaign and the
// announcement) and lends its values to Leadership.Context, not its
// cancellation: leadership lasts until Resign or loss. Pass
// lease.WithLifetime(appCtx) to end it, and release the lease, when the
// service's lifetime context ends (the loss cause is then
// lease.ErrParentDone).
//
// Errors: as lease.Client.Acquire (when ctx ends first, also before the
// first try could tell, ctx's error joined with lease.ErrNotAcquired;
// lease.ErrNilContext for a nil ctx); Redis
// errors writing the leader record (the lease is then released);
// ErrNotCreated for an Election not made by New. A Redis error (Redis
// restarting, a network error) ends the campaign at once, as it ends
// Acquire: a service that must always have a candidate calls Campaign
// again, after a backoff, until its own lifetime ends.
func (e *Election) Campaign(ctx context.Context, value string, opts ...lease.AcquireOption) (*Leadership, error) {
	if err := e.ready(ctx); err != nil {
		return nil, err
	}
	for {
		l, err := e.c.Acquire(ctx, e.name, e.opts.TTL, opts...)
		if err != nil {
			if cerr := ctx.Err(); cerr != nil && !errors.Is(err, lease.ErrNotAcquired) {
				// ctx ended before a try could tell: not elected, as when
				// it ends while the campaign waits.
				err = errors.Join(err, lease.ErrNotAcquired)
			}
			return nil, fmt.Errorf("election %q: campaign: %w", e.name, err)
		}
		ok, err := e.announce(ctx, l, value)
		if err == nil && ok {
			return &Leadership{l: l, value: value}, nil
		}
		if err == nil {
			// The lease key does not hold our owner: the lease was
			// lost at once (or the key layout is not the one the
			// backend gave). The lease client tells which.
			err = l.Renew(ctx)
			if errors.Is(err, lease.ErrNotHeld) {
				// Lost before it was announced: campaign again.
				// Release stops the lost lease's keep-alive.
				_ = l.Release(context.WithoutCancel(ctx))
				continue
			}
			if err == nil {
				err = fmt.Errorf("the lease key %q does not hold the lease's owner", e.leaseKey)
			}
		}
		_ = l.Release(context.WithoutCancel(ctx))
		if ctx.Err() != nil && !errors.Is(err, lease.ErrNotAcquired) {
			// ctx ended while announcing: not elected (the lease is
			// released), as when it ends while the campaign waits.
			err = errors.Join(err, lease.ErrNotAcquired)
		}
		return nil, fmt.Errorf("election %q: announce: %w", e.name, err)
	}
}

// announce writes the leader record if l still holds the lease.
func (e *Election) announce(ctx context.Context, l *lease.Lease, value string) (bool, error) {
	n, err := announceScript.Run(ctx, e.rdb, []string{e.leaseKey, e.recordKey},
		ownerarg.Owner(l.Holder().Owner), l.Token().String(), value, e.channel).Int64()
	if err != nil {
		return false, safe.JoinCtx(ctx, err)
	}
	return n == 1, nil
}

// Leader describes the current leader, as it announced itself.
type Leader struct {
	// Value is what the leader passed to Campaign (an address, a name).
	Value string
	// Token is the fencing token of the leader's lease.
	Token fence.Token
	// OwnerID is the owner id of the leader's lease (fence.OwnerID of its
	// owner): it tells two terms' holders apart in views and logs. The
	// owner itself is a write capability (with Token, what a sink accepts
	// as the leader's), so it never leaves the leader's Leadership.Holder.
	OwnerID string
	// Scope is the name of the leader's lease (the election's name): the
	// scope of Token, as in fence.Holder.
	Scope string
}

// Leader returns the current leader, in one round trip. A leader is
// reported only while its lease key holds its owner: a leader that lost
// its lease is gone at once, not at the end of a TTL.
//
// Errors: ErrNoLeader when no candidate leads (also in the moment between
// an election and its announcement); Redis errors; ErrNotCreated and
// lease.ErrNilContext for misuse.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	if err := e.ready(ctx); err != nil {
		return Leader{}, err
	}
	res, err := leaderScript.Run(ctx, e.rdb, []string{e.leaseKey, e.recordKey}).StringSlice()
	if errors.Is(err, redis.Nil) {
		return Leader{}, ErrNoLeader
	}
	if err == nil && len(res) != 3 {
		err = fmt.Errorf("unexpected reply %q", res)
	}
	if err != nil {
		return Leader{}, safe.JoinCtx(ctx, fmt.Errorf("election %q: leader: %w", e.name, err))
	}
	token, err := strconv.ParseUint(res[1], 10, 64)
	if err != nil {
		return Leader{}, fmt.Errorf("election %q: leader: token %q: %w", e.name, res[1], err)
	}
	return Leader{OwnerID: fence.OwnerID(res[0]), Token: fence.Token(token), Value: res[2], Scope: e.name}, nil
}

// Observe returns the current leader, waiting until there is one or ctx
// ends. It is woken by the election announcement (Redis pub/sub) and
// otherwise reads again within Options.ObservePoll.
//
// Errors: as Leader, except that no leader makes it wait; when ctx ends
// first (also before the first read could tell) it returns ctx's error
// joined with ErrNoLeader.
func (e *Election) Observe(ctx context.Context) (Leader, error) {
	if err := e.ready(ctx); err != nil {
		return Leader{}, err
	}
	ld, err := e.Leader(ctx)
	if cerr := ctx.Err(); err != nil && cerr != nil && !errors.Is(err, ErrNoLeader) {
		return Leader{}, errors.Join(err, ErrNoLeader) // ctx ended before the read could tell
	}
	if !errors.Is(err, ErrNoLeader) {
		return ld, err
	}
	// Subscribe before the next read, so that an election between the two
	// is not missed. Without pub/sub (a proxy that refuses it), poll.
	sub := e.rdb.Subscribe(ctx, e.channel)
	defer sub.Close()
	var elected <-chan *redis.Message
	if _, err := sub.Receive(ctx); err == nil {
		elected = sub.Channel(redis.WithChannelSize(1))
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		ld, err = e.Leader(ctx)
		if err != nil && ctx.Err() != nil && !errors.Is(err, ErrNoLeader) {
			return Leader{}, errors.Join(err, ErrNoLeader) // ctx ended during the read
		}
		if !errors.Is(err, ErrNoLeader) {
			return ld, err
		}
		timer.Reset(jitter(e.opts.ObservePoll))
		select {
		case <-ctx.Done():
			return Leader{}, errors.Join(ctx.Err(), err)
		case <-elected:
		case <-timer.C:
		}
	}
}

// jitter returns a wait in the upper half of d, so that observers spread
// out.
func jitter(d time.Duration) time.Duration {
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(half+1)
}
