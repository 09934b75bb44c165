package quorum

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/internal/formatver"
	"github.com/holdfast-go/holdfast/internal/ownerarg"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
)

// Backend is a leasedriver.Backend over N independent Redis masters: redsync's
// Redlock for the lock, a token issued by a majority, and the keep-alive,
// loss signal and trust window of lease.Client on top. Build a Client on it
// with lease.NewWithBackend. It is safe for concurrent use and starts no
// goroutine of its own outside its calls (Released's listeners are stopped
// and waited for by the function it returns).
type Backend struct {
	nodes  []redis.UniversalClient
	rs     *redsync.Redsync
	quorum int
	opts   Options

	mu   sync.Mutex
	held map[heldKey]*entry // acquisitions not yet released

	lastProposal atomic.Int64 // µs; proposals of this Backend increase

	format    []formatver.Gate        // per master: its stored format was checked (format.go)
	refused   []atomic.Pointer[error] // per master: a refusal a straggling check found, for the next call
	formatAll atomic.Bool             // every master's was
	fmu       sync.Mutex
	checking  []*formatCheck // per master: the check in flight, nil for none (under fmu)
	checked   chan struct{}  // closed and replaced when a check ends (under fmu)
}

// heldKey names one acquisition.
type heldKey struct{ name, owner string }

// entry is the redsync Mutex of one acquisition. A Mutex is not safe for
// concurrent use (Extend writes its expiry), and the keep-alive, a user's
// Lease.Renew and Release may reach it at once: mu serialises them.
type entry struct {
	mu   sync.Mutex
	m    *redsync.Mutex
	call *acquireCall // nil for an acquisition made elsewhere
}

var (
	_ leasedriver.Backend  = (*Backend)(nil)
	_ leasedriver.Notifier = (*Backend)(nil)
)

// New returns a Backend over masters: independent Redis deployments (not
// replicas of one another, not nodes of one Cluster), an odd number of at
// least 3; 3 or 5 is usual. A lease then survives the loss of up to
// len(masters)/2 of them. Each client's timeouts bound how long one
// master can hold up a call: keep DialTimeout and ReadTimeout well below
// your lease TTLs. The Backend does not close the clients.
//
// Errors: ErrInvalidMasters for an even or too small number of masters, a
// nil one or one given twice; ErrInvalidOptions for bad options.
func New(masters []redis.UniversalClient, opts Options) (*Backend, error) {
	if err := checkMasters(masters); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	pools := make([]redsyncredis.Pool, len(masters))
	for i, m := range masters {
		pools[i] = newPool(m, i)
	}
	return &Backend{
		nodes:    slices.Clone(masters),
		rs:       redsync.New(pools...),
		quorum:   len(masters)/2 + 1,
		opts:     opts,
		held:     map[heldKey]*entry{},
		format:   make([]formatver.Gate, len(masters)),
		refused:  make([]atomic.Pointer[error], len(masters)),
		checking: make([]*formatCheck, len(masters)),
		checked:  make(chan struct{}),
	}, nil
}

func checkMasters(masters []redis.UniversalClient) error {
	n := len(masters)
	if n < 3 || n%2 == 0 {
		return fmt.Errorf("%w: got %d", ErrInvalidMasters, n)
	}
	addrs := map[string]int{}
	for i, m := range masters {
		if m == nil {
			return fmt.Errorf("%w: master %d is nil", ErrInvalidMasters, i)
		}
		for j := range i {
			if masters[j] == m {
				return fmt.Errorf("%w: masters %d and %d are the same client", ErrInvalidMasters, j, i)
			}
		}
		if c, ok := m.(*redis.Client); ok {
			addr := c.Options().Addr
			if j, dup := addrs[addr]; dup {
				return fmt.Errorf("%w: masters %d and %d both connect to %s", ErrInvalidMasters, j, i, addr)
			}
			addrs[addr] = i
		}
	}
	return nil
}

// Nodes returns the number of masters.
func (b *Backend) Nodes() int { return len(b.nodes) }

// Quorum returns the majority every operation needs: Nodes()/2 + 1.
func (b *Backend) Quorum() int { return b.quorum }

// Keys returns the keys of the lease called name on every master: the lock
// key (value: owner) and the fence counter. They are the Lease and Fence
// keys redislease.Backend.Keys returns for the same prefix.
func (b *Backend) Keys(name string) (leaseKey, fenceKey string) {
	leaseKey = b.opts.Prefix + "{" + name + "}"
	return leaseKey, leaseKey + fenceSuffix
}

// Acquire implements leasedriver.Backend. It takes the lease on a majority of
// the masters (redsync, one try, plus up to Options.SplitRetries when no
// other owner was seen on a majority), issues the token (see the package
// documentation), and refuses the acquisition when all of it took longer
// than ttl - leasedriver.Drift(ttl).
//
// Errors: *NoQuorumError when fewer than a majority answered (or fewer
// than a majority of counters could be raised to the token);
// *leasedriver.SlowAcquireError when the acquisition was too slow to use (in both
// cases the keys taken were released); ctx's error when it had ended
// before the call.
func (b *Backend) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (leasedriver.Grant, error) {
	start := time.Now()
	if err := ctx.Err(); err != nil {
		// The lock commands outlive redsync's context (see conn.SetNX):
		// do not start them for a caller that has gone.
		return leasedriver.Grant{}, err
	}
	if err := b.checkFormat(ctx); err != nil {
		return leasedriver.Grant{}, err
	}
	leaseKey, _ := b.Keys(name)
	m := b.newMutex(leaseKey, ttl, redsync.WithGenValueFunc(func() (string, error) { return owner, nil }))
	for try := 0; ; try++ {
		call := newAcquireCall(len(b.nodes), b.propose())
		tryStart := time.Now()
		err := m.TryLockContext(context.WithValue(ctx, callKey{}, call))
		decided := time.Since(tryStart)
		if err == nil {
			return b.issue(ctx, name, owner, m, call, count(call.close(true)), start, ttl)
		}
		// A failed try is judged on the answers of every master that
		// answers within StragglerWait of the decision, and redsync's
		// clean-up is ours (see conn.Eval): free what we took before
		// answering or trying again.
		b.straggle(ctx, call)
		v := count(call.close(false))
		undone := b.undo(ctx, leaseKey, owner, v)
		switch {
		case v.granted >= b.quorum:
			// A majority granted, but redsync found the try slower than
			// its validity.
			return leasedriver.Grant{}, &leasedriver.SlowAcquireError{Name: name, Took: time.Since(start), TTL: ttl}
		case v.granted+v.refused < b.quorum:
			return leasedriver.Grant{}, b.noQuorum("acquire", v.granted+v.refused, v.granted, err)
		case try < b.opts.SplitRetries && !v.heldByMajority(b.quorum) && undone &&
			b.settle(ctx, call, b.settleBy(start, ttl, decided)) && b.pause(ctx, try):
			// Judged again on every master's reply, no other owner
			// holds a majority either.
			continue
		default:
			return leasedriver.Grant{Remaining: v.remaining(b.quorum)}, nil
		}
	}
}

// settleBy returns when a failed try decided in decided stops waiting to
// be over everywhere (see Options.SettleWait).
func (b *Backend) settleBy(start time.Time, ttl, decided time.Duration) time.Time {
	by := time.Now().Add(max(b.opts.SettleWait, 10*decided))
	if end := start.Add(ttl - leasedriver.Drift(ttl)); end.Before(by) {
		return end
	}
	return by
}

// StragglerWait bounds how long a failed try waits, after redsync
// decided, for the masters that have not answered yet (5 ms): healthy
// ones answer within it, so the try is judged on full information, while a
// master that hangs does not hold up every failed try.
const StragglerWait = 5 * time.Millisecond

func (b *Backend) straggle(ctx context.Context, call *acquireCall) {
	select {
	case <-call.all:
		return
	default:
	}
	timer := time.NewTimer(StragglerWait)
	defer timer.Stop()
	select {
	case <-call.all:
	case <-timer.C:
	case <-ctx.Done():
	}
}

// undo releases the keys of a failed try on the masters that granted it
// or failed to answer (a timeout or a lost reply: the script may have run
// and taken the key), in parallel, and waits for them; false when a
// release failed. Masters that have not answered yet undo their own late
// grant (conn.SetNX). A key left behind would hold a master for the TTL
// against every later acquisition.
func (b *Backend) undo(ctx context.Context, leaseKey, owner string, v votes) bool {
	if v.granted == 0 && v.failed == 0 {
		return true
	}
	ctx = context.WithoutCancel(ctx)
	keys := []string{leaseKey}
	var (
		wg     sync.WaitGroup
		failed atomic.Bool
	)
	for i, r := range v.replies {
		if r.state.mayHold() {
			wg.Go(func() {
				if releaseScript.Run(ctx, b.nodes[i], keys, ownerarg.Owner(owner)).Err() != nil {
					failed.Store(true)
				}
			})
		}
	}
	wg.Wait()
	return !failed.Load()
}

// settle waits until the failed try call is over on every master (see
// acquireCall), at most until deadline (settleBy) or ctx's end. It
// reports whether the try may be made again with the same owner: it is
// over without an error, and, judged on every master's reply, no other
// owner holds a majority.
func (b *Backend) settle(ctx context.Context, call *acquireCall, deadline time.Time) bool {
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-call.all:
		replies, ok := call.settled()
		return ok && !count(replies).heldByMajority(b.quorum)
	case <-timer.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// newMutex returns a redsync Mutex for key with holdfast's settings: one
// try, answers from a majority suffice (the others are not waited for), the
// same drift as leasedriver.Drift, and a try bounded by the trust window.
func (b *Backend) newMutex(key string, ttl time.Duration, opt redsync.Option) *redsync.Mutex {
	return b.rs.NewMutex(key,
		redsync.WithExpiry(ttl),
		redsync.WithTries(1),
		redsync.WithFailFast(true),
		redsync.WithDriftFactor(float64(leasedriver.Drift(ttl))/float64(ttl)),
		redsync.WithTimeoutFactor(float64(ttl-leasedriver.Drift(ttl))/float64(ttl)),
		opt,
	)
}

// propose returns the token this Backend proposes to the masters: its
// clock in µs plus Options.TokenLead, above its previous proposal; 0 when
// proposals are disabled. See scripts/acquire.lua.
func (b *Backend) propose() int64 {
	if b.opts.TokenLead < 0 {
		return 0
	}
	p := time.Now().UnixMicro() + b.opts.TokenLead.Microseconds()
	for {
		last := b.lastProposal.Load()
		if p <= last {
			p = last + 1
		}
		if b.lastProposal.CompareAndSwap(last, p) {
			return p
		}
	}
}

// pause waits before retry number try+1 of a try that no majority holder
// refused: a random time below Options.SplitDelay << try, so that racers
// who split the masters spread out more on each round (randomized
// exponential backoff, as on a shared Ethernet); false when ctx ended
// first.
func (b *Backend) pause(ctx context.Context, try int) bool {
	if b.opts.SplitDelay <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(rand.N(b.opts.SplitDelay << min(try, 16)))
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// store keeps the Mutex of an acquisition for Renew and Release.
func (b *Backend) store(name, owner string, m *redsync.Mutex, call *acquireCall) {
	b.mu.Lock()
	b.held[heldKey{name, owner}] = &entry{m: m, call: call}
	b.mu.Unlock()
}

// abandon releases the keys of an acquisition that will not be used.
func (b *Backend) abandon(ctx context.Context, m *redsync.Mutex, call *acquireCall) {
	call.abandon()
	_, _ = m.UnlockContext(context.WithValue(context.WithoutCancel(ctx), callKey{}, releaseCall))
}
