package redisstore

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/autopipe"
	"github.com/holdfast-go/holdfast/internal/fencerule"
	"github.com/holdfast-go/holdfast/internal/formatver"
	"github.com/holdfast-go/holdfast/internal/luascript"
	"github.com/holdfast-go/holdfast/internal/ownerarg"
	"github.com/holdfast-go/holdfast/internal/redispolicy"
	"github.com/holdfast-go/holdfast/internal/safe"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore"
	"github.com/holdfast-go/holdfast/sinks/httpfence/internal/storeutil"
)

// Default key prefixes of the Redis stores.
const (
	DefaultStorePrefix = "holdfast:idem:"
	DefaultFencePrefix = "holdfast:fence:"
)

// Options configure a Store or a Fence. The zero value is valid.
type Options struct {
	// Prefix starts every key; give each application its own. Default
	// DefaultStorePrefix ("holdfast:idem:") for NewStore and
	// DefaultFencePrefix ("holdfast:fence:") for NewFence.
	Prefix string
	// Eviction: the zero value reads maxmemory-policy (CONFIG GET, before
	// the first write and again a minute after each read that passed)
	// and refuses a Redis that may evict keys
	// (ErrEvictionPolicy) or refuses CONFIG GET (ErrEvictionPolicyUnknown):
	// an evicted record runs a handler again, an evicted fence accepts a
	// stale token once. See redislease.Eviction for declaring the policy
	// (managed Redis) or running anyway.
	Eviction Eviction
}

// Eviction configures the eviction-policy check; it is redislease.Eviction.
type Eviction = redispolicy.Options

// Errors of the eviction-policy check and of a full Redis, the same values
// as lease's (redislease.ErrEvictionPolicy, ...).
var (
	// ErrEvictionPolicy is returned by the first writes on a Redis that
	// may evict keys, without Options.Eviction.AllowEviction.
	ErrEvictionPolicy = redispolicy.ErrEvictionPolicy
	// ErrEvictionPolicyUnknown is returned by the first writes on a Redis
	// that refuses CONFIG GET, when Eviction.Policy declares nothing.
	ErrEvictionPolicyUnknown = redispolicy.ErrPolicyUnknown
	// ErrRedisMemoryFull matches a write Redis refused with OOM.
	ErrRedisMemoryFull = redispolicy.ErrMemoryFull
)

// Scripts run with EVALSHA and fall back to EVAL on NOSCRIPT (see
// internal/luascript), the calls of concurrent requests batched into
// pipelines. Each works on one key (a slot scope's fence and its
// watermark share their unit's hash), so all of them run on Redis Cluster;
// keys carry a hash tag all the same, so that a future script touching a
// record's companion keys stays in one slot. The fence script starts with
// the acceptance rule every holdfast script shares (internal/fencerule).
var (
	//go:embed scripts/begin.lua
	beginSrc    string
	beginScript = luascript.New(beginSrc)

	//go:embed scripts/complete.lua
	completeSrc    string
	completeScript = luascript.New(completeSrc)

	//go:embed scripts/abandon.lua
	abandonSrc    string
	abandonScript = luascript.New(abandonSrc)

	//go:embed scripts/fence.lua
	fenceSrc    string
	fenceScript = luascript.New(fencerule.Lua, fenceSrc)
)

// Store is an idemstore.Store in Redis: one hash per key, named
// <prefix>{<hex sha256 of the key>}, expiring after the lock TTL while in
// flight and after the completed TTL once completed. Every operation is one
// Lua script, one round trip. Works with any redis.UniversalClient (single,
// Sentinel, Cluster). Safe for concurrent use.
//
// Redis is as durable as its persistence settings: a restart without
// persistence, a failover that loses writes or an eviction forgets keys, and
// a retry of a forgotten key runs the handler again. Fence the handler's own
// writes (see the package documentation) where that matters. A Redis that
// may evict keys is refused unless Options.Eviction allows it.
type Store struct {
	auto   *autopipe.Pipe
	prefix string
	policy *redispolicy.Checker
	format formatver.Gate // the stored format, checked before the first Begin
}

// The stores' names in format markers and errors: a Store and a Fence
// refuse each other's prefix (their keys are hashes of different inputs
// and could meet).
const (
	storeName = "sinks/httpfence/redisstore.Store"
	fenceName = "sinks/httpfence/redisstore.Fence"
)

// checkFormat checks the stored format of the keys under prefix unless
// done before: the marker key prefix + "format" must hold "holdfast
// <name> format 1" (written there when missing), or the call fails with a
// *fence.FormatError (fence.ErrUnknownFormat): records of a newer build's
// format, or another store's keys under the prefix (docs/compatibility.md).
func checkFormat(ctx context.Context, g *formatver.Gate, p luascript.Processor, name, prefix string) error {
	if g.Passed() {
		return nil
	}
	return g.Check(ctx, func(ctx context.Context) error { return formatver.Redis(ctx, p, name, prefix) })
}

// NewStore returns a Store on rdb whose keys start with opts.Prefix
// (DefaultStorePrefix when empty). Give each application its own prefix.
// It returns an error matching httpfence.ErrInvalidOptions for a nil rdb (a
// typed nil *redis.Client included).
func NewStore(rdb redis.UniversalClient, opts Options) (*Store, error) {
	prefix := opts.Prefix
	if safe.IsNil(rdb) {
		return nil, fmt.Errorf("%w: redisstore.Store over a nil redis client", httpfence.ErrInvalidOptions)
	}
	if prefix == "" {
		prefix = DefaultStorePrefix
	}
	if err := opts.Eviction.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", httpfence.ErrInvalidOptions, err)
	}
	return &Store{auto: autopipe.New(rdb), prefix: prefix, policy: redispolicy.New(rdb, opts.Eviction, "redisstore.Options.Eviction")}, nil
}

func (s *Store) key(key string) string { return hashedKey(s.prefix, key) }

// ready reports a Store not made by NewStore.
func (s *Store) ready() error {
	if s == nil || s.auto == nil {
		return fmt.Errorf("%w: redisstore.Store not made by NewStore", httpfence.ErrInvalidOptions)
	}
	return nil
}

// hashedKey names the Redis key for an arbitrary string: hashing keeps the
// name short and keeps user bytes (braces above all) out of the hash tag.
func hashedKey(prefix, s string) string {
	sum := sha256.Sum256([]byte(s))
	return prefix + "{" + hex.EncodeToString(sum[:]) + "}"
}

// Begin implements idemstore.Store.
func (s *Store) Begin(ctx context.Context, key, fingerprint string, lockTTL time.Duration) (idemstore.Outcome, error) {
	if ctx == nil {
		return idemstore.Outcome{}, nilContext("Begin")
	}
	if err := s.ready(); err != nil {
		return idemstore.Outcome{}, err
	}
	if err := storeutil.ValidTTL("lock TTL", lockTTL); err != nil {
		return idemstore.Outcome{}, err
	}
	lock, err := storeutil.NewLock()
	if err != nil {
		return idemstore.Outcome{}, err
	}
	if err := s.policy.Check(ctx); err != nil {
		return idemstore.Outcome{}, fmt.Errorf("httpfence: redis begin: %w", err)
	}
	if err := checkFormat(ctx, &s.format, s.auto, storeName, s.prefix); err != nil {
		return idemstore.Outcome{}, err
	}
	res, err := beginScript.Run(ctx, s.auto, []string{s.key(key)}, fingerprint, lock, lockTTL.Milliseconds(), key).StringSlice()
	if err != nil {
		return idemstore.Outcome{}, fmt.Errorf("httpfence: redis begin: %w", redispolicy.MemoryFull(err))
	}
	switch {
	case len(res) == 1 && res[0] == "new":
		return idemstore.Outcome{State: idemstore.StateNew, Lock: lock}, nil
	case len(res) == 2 && res[0] == "inflight":
		ms, err := strconv.ParseInt(res[1], 10, 64)
		if err != nil {
			return idemstore.Outcome{}, fmt.Errorf("httpfence: redis begin: lock TTL %q: %w", res[1], err)
		}
		// PTTL is -1 for a record without expiry, which begin.lua never
		// writes: at least 1 ms, as for every store.
		return idemstore.Outcome{State: idemstore.StateInFlight, LockLeft: max(time.Duration(ms)*time.Millisecond, time.Millisecond)}, nil
	case len(res) == 1 && res[0] == "mismatch":
		return idemstore.Outcome{State: idemstore.StateMismatch}, nil
	case len(res) == 4 && res[0] == "completed":
		status, err := strconv.Atoi(res[1])
		if err != nil {
			return idemstore.Outcome{}, fmt.Errorf("httpfence: redis begin: stored status %q: %w", res[1], err)
		}
		h, err := storeutil.DecodeHeader([]byte(res[2]))
		if err != nil {
			return idemstore.Outcome{}, err
		}
		return idemstore.Outcome{State: idemstore.StateCompleted, Response: &idemstore.Response{Status: status, Header: h, Body: []byte(res[3])}}, nil
	}
	return idemstore.Outcome{}, fmt.Errorf("httpfence: redis begin: unexpected reply %q", res)
}

// Complete implements idemstore.Store.
func (s *Store) Complete(ctx context.Context, key, lock string, resp *idemstore.Response, ttl time.Duration) error {
	if ctx == nil {
		return nilContext("Complete")
	}
	if err := s.ready(); err != nil {
		return err
	}
	if err := storeutil.ValidTTL("TTL", ttl); err != nil {
		return err
	}
	h, err := storeutil.EncodeHeader(resp.Header)
	if err != nil {
		return err
	}
	ok, err := completeScript.Run(ctx, s.auto, []string{s.key(key)}, lock, resp.Status, h, resp.Body, ttl.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("httpfence: redis complete: %w", err)
	}
	if ok != 1 {
		return fmt.Errorf("%w: key %q", idemstore.ErrLockLost, key)
	}
	return nil
}

// Abandon implements idemstore.Store.
func (s *Store) Abandon(ctx context.Context, key, lock string) error {
	if ctx == nil {
		return nilContext("Abandon")
	}
	if err := s.ready(); err != nil {
		return err
	}
	ok, err := abandonScript.Run(ctx, s.auto, []string{s.key(key)}, lock).Int()
	if err != nil {
		return fmt.Errorf("httpfence: redis abandon: %w", err)
	}
	if ok != 1 {
		return fmt.Errorf("%w: key %q", idemstore.ErrLockLost, key)
	}
	return nil
}

// Fence is an idemstore.FenceStore in Redis: one hash per (resource, scope),
// named <prefix>{<hex sha256 of len(scope) ":" scope ":" resource>}, for
// scope "" too, except for slot scopes (below). A hash holds the highest
// token accepted and its owner (and, for operators, the resource and
// scope), without expiry. The length prefix makes the name injective
// whatever bytes the scope and resource hold: scope "" with resource
// "5:hello:/pay" is "0::5:hello:/pay", never scope "hello" with resource
// "/pay". (Before issue 31 scope "" was named by the resource alone, which
// let such a resource share a scoped pair's fence; holdfast had no release
// with that layout, so nothing migrates.) The check and the raise are one
// Lua script. Tokens are compared exactly over the whole uint64 range.
// Safe for concurrent use.
//
// The fences of a slot scope ("<unit>@<unix seconds>", fence.SplitSlotScope)
// live in one hash per (resource, unit) instead, named <prefix>{<hex sha256
// of "@" len(unit) ":" unit ":" resource>}: fields resource and unit, per
// slot token:<slot> and owner:<slot>, and closed, the watermark
// PruneSlotScopes raises, so that a prune and every Accept of the unit
// meet in one key (see the package documentation, "Pruning slot scopes").
//
// A Redis that loses the record (restart without persistence, failover,
// eviction, which is refused unless Options.Eviction allows it) forgets the
// highest token and accepts a stale one once; a Postgres fence
// (pgstore.NewFence) does not.
type Fence struct {
	auto   *autopipe.Pipe
	prefix string
	policy *redispolicy.Checker
	format formatver.Gate // the stored format, checked before the first Accept or prune
}

// NewFence returns a Fence on rdb whose keys start with opts.Prefix
// (DefaultFencePrefix when empty). It returns an error matching
// httpfence.ErrInvalidOptions for a nil rdb (a typed nil *redis.Client
// included).
func NewFence(rdb redis.UniversalClient, opts Options) (*Fence, error) {
	prefix := opts.Prefix
	if safe.IsNil(rdb) {
		return nil, fmt.Errorf("%w: redisstore.Fence over a nil redis client", httpfence.ErrInvalidOptions)
	}
	if prefix == "" {
		prefix = DefaultFencePrefix
	}
	if err := opts.Eviction.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", httpfence.ErrInvalidOptions, err)
	}
	return &Fence{auto: autopipe.New(rdb), prefix: prefix, policy: redispolicy.New(rdb, opts.Eviction, "redisstore.Options.Eviction")}, nil
}

// Accept implements idemstore.FenceStore. A slot scope
// (fence.SplitSlotScope) of a slot below its unit's watermark
// (PruneSlotScopes) is refused, whatever its token, with a
// *fence.StaleTokenError matching fence.ErrScopeClosed.
func (f *Fence) Accept(ctx context.Context, resource string, h fence.Holder) error {
	if f == nil || f.auto == nil {
		return fmt.Errorf("%w: redisstore.Fence not made by NewFence", httpfence.ErrInvalidOptions)
	}
	if ctx == nil {
		return nilContext("Fence.Accept")
	}
	if h.Token == fence.None {
		return fmt.Errorf("httpfence: fence %q: %w", resource, fence.ErrNoToken)
	}
	if err := f.policy.Check(ctx); err != nil {
		return fmt.Errorf("httpfence: redis fence %q: %w", resource, err)
	}
	if err := checkFormat(ctx, &f.format, f.auto, fenceName, f.prefix); err != nil {
		return err
	}
	if unit, slot, ok := fence.SplitSlotScope(h.Scope); ok {
		return f.acceptSlot(ctx, resource, h, unit, slot)
	}
	res, err := fenceScript.Run(ctx, f.auto, []string{fenceKey(f.prefix, resource, h.Scope)}, h.Token.String(), ownerarg.Owner(h.Owner), resource, h.Scope).Slice()
	if err != nil {
		return fmt.Errorf("httpfence: redis fence %q: %w", resource, redispolicy.MemoryFull(err))
	}
	return fenceOutcome(resource, h, res)
}

// fenceKey names the record of (resource, scope): the scope is
// length-prefixed, for scope "" too, so "<len(scope)>:<scope>:<resource>"
// names exactly one pair whatever bytes both hold (scope "" with resource
// "5:hello:/pay" is "0::5:hello:/pay", never scope "hello" with "/pay").
func fenceKey(prefix, resource, scope string) string {
	return hashedKey(prefix, strconv.Itoa(len(scope))+":"+scope+":"+resource)
}

// nilContext is the error of method op called with a nil context.
func nilContext(op string) error {
	return fmt.Errorf("redisstore: %s: %w", op, idemstore.ErrNilContext)
}
