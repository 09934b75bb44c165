// Package redispolicy checks, once per client, that a Redis keeps what
// holdfast writes: its maxmemory-policy must not evict keys. The lease
// backend, the Redis ledger and the Redis sinks share one Checker each and
// call Check before their first write.
//
// # What is refused
//
// A Redis evicts keys when maxmemory is set (not 0) and maxmemory-policy
// is anything but noeviction: the allkeys-* policies evict any key, the
// volatile-* ones any key with a TTL, and every lease key has one. An
// evicted lease key lets a competitor take the lease while its holder
// still believes it holds it, until its next renewal. Such a Redis is
// refused with *PolicyError (ErrEvictionPolicy) unless the user opts in
// (Options.AllowEviction), and then evictions are counted (Evictions).
//
// # When CONFIG GET is refused
//
// Managed Redis services often forbid CONFIG (ERR unknown command,
// NOPERM). Then the policy cannot be read and Check refuses with
// *UnknownError (ErrPolicyUnknown) until Options.Policy declares it (the
// value the provider's console shows), or Options.AllowEviction accepts
// whatever it is (and counts evictions as for an evicting Redis). A
// declared policy is trusted and not read.
//
// # Scope
//
// Check reads every master of a *redis.ClusterClient (ForEachMaster) and
// every shard of a *redis.Ring; other clients (a single server, a
// Sentinel failover client) answer from the server they send to, the
// master. A refusal or an I/O error is not cached, so the next call reads
// again. A successful read is trusted for RecheckInterval (1 min); the
// first call after it reads again while the other calls go on, so a policy
// changed later with CONFIG SET, or a failover to a master configured
// otherwise, is refused from the next write after at most that long
// (plus the read's round trip). A re-read that fails on I/O keeps the
// last answer and is tried again by the next call. A declared policy
// (Options.Policy) is never read.
package redispolicy

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// NoEviction is the maxmemory-policy under which Redis never evicts a key:
// a write that needs memory past maxmemory is refused with an OOM error.
const NoEviction = "noeviction"

var (
	// ErrEvictionPolicy matches every *PolicyError: the Redis may evict
	// keys.
	ErrEvictionPolicy = errors.New("redis may evict keys (maxmemory-policy)")
	// ErrPolicyUnknown matches every *UnknownError: CONFIG GET was
	// refused and no policy was declared.
	ErrPolicyUnknown = errors.New("redis maxmemory-policy unknown")
	// ErrMemoryFull matches every *MemoryFullError: the Redis refused a
	// write because its memory is full (OOM under noeviction).
	ErrMemoryFull = errors.New("redis memory is full")
)

// Options declare what Check may accept. The zero value reads the policy
// with CONFIG GET and refuses a Redis that may evict keys.
type Options struct {
	// Policy declares the server's maxmemory-policy ("noeviction",
	// "volatile-lru", ...) where CONFIG GET is refused (managed Redis):
	// it is trusted and not read, and any value but "noeviction" counts
	// as evicting (the maxmemory limit is not known). "" (the default)
	// reads it with CONFIG GET on first use.
	Policy string
	// AllowEviction runs on a Redis that may evict keys instead of
	// refusing it. A lease whose key is evicted can then be taken by
	// another owner before its holder learns of it (at its next renewal,
	// at most a third of the TTL later): the sinks' fencing still refuses
	// the old holder's writes. Evictions are counted (Evictions) and
	// reported by the lease Client (the redis_evictions event and the
	// Observer). Default false: refuse.
	AllowEviction bool
}

// Validate checks a declared policy: "" or one of Redis's policy names.
func (o Options) Validate() error {
	switch o.Policy {
	case "", NoEviction, "allkeys-lru", "allkeys-lfu", "allkeys-random",
		"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl":
		return nil
	}
	return fmt.Errorf("Eviction.Policy %q is not a Redis maxmemory-policy (noeviction, allkeys-lru, volatile-lru, ...)", o.Policy)
}

// PolicyError reports a Redis that may evict keys. It matches
// ErrEvictionPolicy.
type PolicyError struct {
	// Addr is the server that answered ("" for a declared policy).
	Addr string
	// Policy is its maxmemory-policy and MaxMemory its maxmemory in bytes
	// (-1 when declared, not read).
	Policy    string
	MaxMemory int64
	// Option names the option that opts in or declares the policy, for
	// the message ("redislease.Options.Eviction").
	Option string
}

// Error implements error: why, and what to set.
func (e *PolicyError) Error() string {
	where := "declared in " + e.Option + ".Policy"
	if e.Addr != "" {
		where = fmt.Sprintf("at %s, maxmemory %d", e.Addr, e.MaxMemory)
	}
	return fmt.Sprintf("%v: %q (%s) lets Redis evict keys that hold leases, fences or ledger records, "+
		"and a lease whose key is evicted can be taken by another owner before its holder learns of it; "+
		"run `CONFIG SET maxmemory-policy noeviction` (and persist it in redis.conf or the provider's parameter group), "+
		"or set %s.AllowEviction to run anyway with evictions reported", ErrEvictionPolicy, e.Policy, where, e.Option)
}

// Is makes errors.Is(err, ErrEvictionPolicy) true.
func (e *PolicyError) Is(target error) bool { return target == ErrEvictionPolicy }

// UnknownError reports a Redis that refused CONFIG GET maxmemory-policy
// when no policy was declared. It matches ErrPolicyUnknown and unwraps to
// the server's reply.
type UnknownError struct {
	Addr   string
	Option string
	Err    error
}

// Error implements error: why, and what to set.
func (e *UnknownError) Error() string {
	return fmt.Sprintf("%v: CONFIG GET maxmemory-policy refused at %s (%v); "+
		"declare the policy your provider configures in %s.Policy (\"noeviction\" if it is), "+
		"or set %s.AllowEviction to run on a Redis that may evict keys", ErrPolicyUnknown, e.Addr, e.Err, e.Option, e.Option)
}

// Is makes errors.Is(err, ErrPolicyUnknown) true.
func (e *UnknownError) Is(target error) bool { return target == ErrPolicyUnknown }

// Unwrap returns the server's reply.
func (e *UnknownError) Unwrap() error { return e.Err }

// MemoryFullError reports a write Redis refused with OOM: used memory is
// over maxmemory and the policy (noeviction) frees none. It matches
// ErrMemoryFull and unwraps to the server's reply.
type MemoryFullError struct{ Err error }

// Error implements error.
func (e *MemoryFullError) Error() string {
	return fmt.Sprintf("%v (used memory > maxmemory, nothing may be evicted): "+
		"free memory (expire or delete other keys) or raise maxmemory: %v", ErrMemoryFull, e.Err)
}

// Is makes errors.Is(err, ErrMemoryFull) true.
func (e *MemoryFullError) Is(target error) bool { return target == ErrMemoryFull }

// Unwrap returns the server's reply.
func (e *MemoryFullError) Unwrap() error { return e.Err }

// MemoryFull returns err as a *MemoryFullError when it is Redis's OOM
// reply ("OOM command not allowed when used memory > 'maxmemory'"), and
// err unchanged otherwise (nil too).
func MemoryFull(err error) error {
	var rerr redis.Error
	if err == nil || !errors.As(err, &rerr) || !strings.HasPrefix(rerr.Error(), "OOM ") {
		return err
	}
	if errors.Is(err, ErrMemoryFull) {
		return err
	}
	return &MemoryFullError{Err: err}
}

// Checker checks one client's Redis once (see the package doc). It is safe
// for concurrent use: concurrent first calls share one read.
type Checker struct {
	rdb    redis.UniversalClient
	opts   Options
	option string

	ok     atomic.Bool  // a check passed: trusted until RecheckInterval after passed
	passed atomic.Int64 // when the last read passed, ns on the monotonic clock since base
	base   time.Time    // the origin of passed (its monotonic reading)
	now    func() time.Time
	sem    chan struct{} // one read at a time

	evicting atomic.Bool // the Redis may evict (and AllowEviction let it run)
	noCount  atomic.Bool // INFO stats refused: evictions cannot be counted
	mu       sync.Mutex
	seen     map[string]int64 // evicted_keys per server at the last Evictions
}

// New returns a Checker of rdb. option names the caller's option field in
// messages ("redislease.Options.Eviction"). It sends nothing.
func New(rdb redis.UniversalClient, opts Options, option string) *Checker {
	return NewWithClock(rdb, opts, option, time.Now)
}

// NewWithClock is New with the clock that times RecheckInterval (tests);
// only differences of its readings are used.
func NewWithClock(rdb redis.UniversalClient, opts Options, option string, now func() time.Time) *Checker {
	return &Checker{rdb: rdb, opts: opts, option: option, sem: make(chan struct{}, 1), now: now, base: now()}
}

// RecheckInterval is how long a Checker trusts a read that passed before
// it reads the policy again (see the package documentation).
const RecheckInterval = time.Minute

// fresh reports whether the last passed read is recent enough to trust.
func (c *Checker) fresh() bool {
	return c.opts.Policy != "" || c.elapsed()-c.passed.Load() < int64(RecheckInterval)
}

// elapsed is the Checker's clock, in ns since base.
func (c *Checker) elapsed() int64 { return int64(c.now().Sub(c.base)) }

// Evicting reports whether a passed check found (or was told) that the
// Redis may evict keys, and AllowEviction let it run.
func (c *Checker) Evicting() bool { return c != nil && c.evicting.Load() }

// Check returns nil when the Redis keeps every key, or may evict keys and
// AllowEviction is set; *PolicyError or *UnknownError otherwise; or the
// I/O error of the read (joined with ctx's when it ended), which is
// retried by the next call. After a nil it costs two atomic loads and a
// clock reading, until RecheckInterval passed: then one call reads again
// (the others meanwhile answer nil at once), and answers as the first did,
// but an I/O error, which keeps the last answer (nil) for the next call to
// read again.
func (c *Checker) Check(ctx context.Context) error {
	if c == nil {
		return nil
	}
	if c.ok.Load() {
		if c.fresh() {
			return nil
		}
		select {
		case c.sem <- struct{}{}:
		default:
			return nil // another call reads again
		}
		defer func() { <-c.sem }()
		if c.fresh() {
			return nil
		}
		return c.recheck(ctx)
	}
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-c.sem }()
	if c.ok.Load() {
		return nil
	}
	return c.first(ctx)
}

// recheck reads the policy of a Checker that passed before: a refusal ends
// the pass, an I/O error keeps it. c.sem is held.
func (c *Checker) recheck(ctx context.Context) error {
	evicting, err := c.read(ctx)
	var perr *PolicyError
	var uerr *UnknownError
	switch {
	case errors.As(err, &perr), errors.As(err, &uerr):
		c.ok.Store(false)
		c.evicting.Store(false)
		return err
	case err != nil:
		return nil
	case evicting && !c.evicting.Load():
		return c.pass(ctx, true)
	}
	c.evicting.Store(evicting)
	c.passed.Store(c.elapsed())
	return nil
}

// first makes the first read, or the one after a refusal. c.sem is held.
func (c *Checker) first(ctx context.Context) error {
	evicting, err := c.read(ctx)
	if err != nil {
		return err
	}
	return c.pass(ctx, evicting)
}

// pass records a read that passed: evicting (allowed by AllowEviction)
// or not. c.sem is held.
func (c *Checker) pass(ctx context.Context, evicting bool) error {
	if evicting {
		c.evicting.Store(true)
		// The baseline of the counter: evictions before this point
		// touched nothing of ours yet.
		if _, err := c.Evictions(ctx); err != nil {
			var rerr redis.Error
			if !errors.As(err, &rerr) {
				c.evicting.Store(false)
				return err
			}
			c.noCount.Store(true) // INFO refused: nothing to count with
		}
	}
	c.passed.Store(c.elapsed())
	c.ok.Store(true)
	return nil
}

// read returns whether the Redis may evict keys, refusing it (or an
// unreadable one) unless allowed.
func (c *Checker) read(ctx context.Context) (evicting bool, err error) {
	if c.opts.Policy != "" {
		if c.opts.Policy == NoEviction {
			return false, nil
		}
		if c.opts.AllowEviction {
			return true, nil
		}
		return false, &PolicyError{Policy: c.opts.Policy, MaxMemory: -1, Option: c.option}
	}
	var mu sync.Mutex
	err = c.forEach(ctx, func(ctx context.Context, node redis.Cmdable, addr string) error {
		policy, maxmem, err := readNode(ctx, node)
		if err != nil {
			var rerr redis.Error
			if errors.As(err, &rerr) && ctx.Err() == nil {
				// The server answered: CONFIG is forbidden or unknown.
				return &UnknownError{Addr: addr, Option: c.option, Err: err}
			}
			return fmt.Errorf("redis at %s: CONFIG GET maxmemory-policy: %w", addr, err)
		}
		if policy == NoEviction || maxmem == 0 {
			return nil
		}
		if !c.opts.AllowEviction {
			return &PolicyError{Addr: addr, Policy: policy, MaxMemory: maxmem, Option: c.option}
		}
		mu.Lock()
		evicting = true
		mu.Unlock()
		return nil
	})
	if err != nil {
		var uerr *UnknownError
		if errors.As(err, &uerr) && c.opts.AllowEviction {
			// Opted in to eviction anyway: an unknown policy is no worse.
			return true, nil
		}
		if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
			err = errors.Join(err, cerr)
		}
		return false, err
	}
	return evicting, nil
}

// readNode reads maxmemory-policy and maxmemory of one server.
func readNode(ctx context.Context, node redis.Cmdable) (policy string, maxmem int64, err error) {
	m, err := node.ConfigGet(ctx, "maxmemory*").Result()
	if err != nil {
		return "", 0, err
	}
	policy, ok := m["maxmemory-policy"]
	if !ok {
		return "", 0, redis.Error(errNoPolicy)
	}
	maxmem, err = strconv.ParseInt(m["maxmemory"], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("maxmemory %q: %w", m["maxmemory"], err)
	}
	return policy, maxmem, nil
}

// errNoPolicy is a reply without maxmemory-policy (a proxy that answers
// CONFIG GET with nothing): treated as a refusal.
var errNoPolicy = noPolicy{}

type noPolicy struct{}

func (noPolicy) Error() string { return "ERR CONFIG GET answered without maxmemory-policy" }
func (noPolicy) RedisError()   {}

// forEach runs fn on every master (Cluster) or shard (Ring), or on the
// client itself.
func (c *Checker) forEach(ctx context.Context, fn func(ctx context.Context, node redis.Cmdable, addr string) error) error {
	each := func(ctx context.Context, node *redis.Client) error { return fn(ctx, node, node.Options().Addr) }
	switch r := c.rdb.(type) {
	case *redis.ClusterClient:
		return r.ForEachMaster(ctx, each)
	case *redis.Ring:
		return r.ForEachShard(ctx, each)
	case *redis.Client:
		return each(ctx, r)
	}
	return fn(ctx, c.rdb, fmt.Sprintf("%T", c.rdb))
}

// Evictions returns how many keys the Redis evicted (INFO stats,
// evicted_keys, summed over its masters) since the previous call; the
// first call (Check makes it) sets the baseline and returns 0. A server
// whose counter went down (a restart, CONFIG RESETSTAT) restarts its
// baseline. It is 0 without a read for a Redis that keeps every key, or
// one that refused INFO when Check read the baseline.
func (c *Checker) Evictions(ctx context.Context) (int64, error) {
	if !c.Evicting() || c.noCount.Load() {
		return 0, nil
	}
	var mu sync.Mutex
	now := map[string]int64{}
	err := c.forEach(ctx, func(ctx context.Context, node redis.Cmdable, addr string) error {
		info, err := node.Info(ctx, "stats").Result()
		if err != nil {
			return err
		}
		n, err := strconv.ParseInt(infoField(info, "evicted_keys"), 10, 64)
		if err != nil {
			return fmt.Errorf("INFO stats evicted_keys: %w", err)
		}
		mu.Lock()
		now[addr] = n
		mu.Unlock()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("redis evictions: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var delta int64
	if c.seen != nil {
		for addr, n := range now {
			if last, ok := c.seen[addr]; ok && n >= last {
				delta += n - last
			}
		}
	}
	c.seen = now
	return delta, nil
}

// infoField returns the value of field in an INFO reply, or "".
func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), field+":"); ok {
			return v
		}
	}
	return ""
}
