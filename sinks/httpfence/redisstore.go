package httpfence

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"reflect"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/fence"
)

// Default key prefixes of the Redis stores.
const (
	DefaultRedisStorePrefix = "holdfast:idem:"
	DefaultRedisFencePrefix = "holdfast:fence:"
)

// Scripts run with EVALSHA and fall back to EVAL on NOSCRIPT, as
// redis.Script.Run does. Each works on one key, so all of them run on Redis
// Cluster; keys carry a hash tag all the same, so that a future script
// touching a record's companion keys stays in one slot.
var (
	//go:embed scripts/begin.lua
	beginSrc    string
	beginScript = redis.NewScript(beginSrc)

	//go:embed scripts/complete.lua
	completeSrc    string
	completeScript = redis.NewScript(completeSrc)

	//go:embed scripts/abandon.lua
	abandonSrc    string
	abandonScript = redis.NewScript(abandonSrc)

	//go:embed scripts/fence.lua
	fenceSrc    string
	fenceScript = redis.NewScript(fenceSrc)
)

// RedisStore is a Store in Redis: one hash per key, named
// <prefix>{<hex sha256 of the key>}, expiring after the lock TTL while in
// flight and after the completed TTL once completed. Every operation is one
// Lua script, one round trip. Works with any redis.UniversalClient (single,
// Sentinel, Cluster). Safe for concurrent use.
//
// Redis is as durable as its persistence settings: a restart without
// persistence, a failover that loses writes or an eviction forgets keys, and
// a retry of a forgotten key runs the handler again. Fence the handler's own
// writes (see the package documentation) where that matters.
type RedisStore struct {
	rdb    redis.Scripter
	prefix string
}

// NewRedisStore returns a RedisStore on rdb whose keys start with prefix
// (DefaultRedisStorePrefix when empty). Give each application its own prefix.
func NewRedisStore(rdb redis.Scripter, prefix string) *RedisStore {
	if prefix == "" {
		prefix = DefaultRedisStorePrefix
	}
	return &RedisStore{rdb: rdb, prefix: prefix}
}

func (s *RedisStore) key(key string) string { return hashedKey(s.prefix, key) }

// ready reports a store made over a nil client, for Middleware to refuse.
func (s *RedisStore) ready() error {
	if s == nil || isNilClient(s.rdb) {
		return fmt.Errorf("%w: RedisStore over a nil redis client", ErrInvalidConfig)
	}
	return nil
}

// ready reports a fence made over a nil client, for Middleware to refuse.
func (f *RedisFence) ready() error {
	if f == nil || isNilClient(f.rdb) {
		return fmt.Errorf("%w: RedisFence over a nil redis client", ErrInvalidConfig)
	}
	return nil
}

func isNilClient(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

// hashedKey names the Redis key for an arbitrary string: hashing keeps the
// name short and keeps user bytes (braces above all) out of the hash tag.
func hashedKey(prefix, s string) string {
	sum := sha256.Sum256([]byte(s))
	return prefix + "{" + hex.EncodeToString(sum[:]) + "}"
}

// Begin implements Store.
func (s *RedisStore) Begin(ctx context.Context, key, fingerprint string, lockTTL time.Duration) (Outcome, error) {
	if err := validTTL("lock TTL", lockTTL); err != nil {
		return Outcome{}, err
	}
	lock, err := newLock()
	if err != nil {
		return Outcome{}, err
	}
	res, err := beginScript.Run(ctx, s.rdb, []string{s.key(key)}, fingerprint, lock, lockTTL.Milliseconds(), key).StringSlice()
	if err != nil {
		return Outcome{}, fmt.Errorf("httpfence: redis begin: %w", err)
	}
	switch {
	case len(res) == 1 && res[0] == "new":
		return Outcome{State: StateNew, Lock: lock}, nil
	case len(res) == 1 && res[0] == "inflight":
		return Outcome{State: StateInFlight}, nil
	case len(res) == 1 && res[0] == "mismatch":
		return Outcome{State: StateMismatch}, nil
	case len(res) == 4 && res[0] == "completed":
		status, err := strconv.Atoi(res[1])
		if err != nil {
			return Outcome{}, fmt.Errorf("httpfence: redis begin: stored status %q: %w", res[1], err)
		}
		h, err := decodeHeader([]byte(res[2]))
		if err != nil {
			return Outcome{}, err
		}
		return Outcome{State: StateCompleted, Response: &Response{Status: status, Header: h, Body: []byte(res[3])}}, nil
	}
	return Outcome{}, fmt.Errorf("httpfence: redis begin: unexpected reply %q", res)
}

// Complete implements Store.
func (s *RedisStore) Complete(ctx context.Context, key, lock string, resp *Response, ttl time.Duration) error {
	if err := validTTL("TTL", ttl); err != nil {
		return err
	}
	h, err := encodeHeader(resp.Header)
	if err != nil {
		return err
	}
	ok, err := completeScript.Run(ctx, s.rdb, []string{s.key(key)}, lock, resp.Status, h, resp.Body, ttl.Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("httpfence: redis complete: %w", err)
	}
	if ok != 1 {
		return fmt.Errorf("%w: key %q", ErrLockLost, key)
	}
	return nil
}

// Abandon implements Store.
func (s *RedisStore) Abandon(ctx context.Context, key, lock string) error {
	ok, err := abandonScript.Run(ctx, s.rdb, []string{s.key(key)}, lock).Int()
	if err != nil {
		return fmt.Errorf("httpfence: redis abandon: %w", err)
	}
	if ok != 1 {
		return fmt.Errorf("%w: key %q", ErrLockLost, key)
	}
	return nil
}

// RedisFence is a FenceStore in Redis: one hash per (resource, scope),
// named <prefix>{<hex sha256 of len(scope) ":" scope ":" resource>}, and
// for scope "" <prefix>{<hex sha256 of resource>}, the name every record
// had before scopes existed: a pre-upgrade record is the fence of scope ""
// (as in pgfence and redisfence), so a client that sends no Fencing-Scope
// stays fenced by what it raised before the upgrade. A hash holds the
// highest token accepted and its owner (and, for operators, the resource
// and scope), without expiry. The length prefix keeps scoped names apart
// whatever bytes the scope and resource hold; a scope-"" resource spelled
// like "<n>:<scope>:<resource>" shares that pair's fence, which can only
// refuse more, never accept a stale token. The check and the raise are one
// Lua script.
// Tokens are compared exactly over the whole uint64 range. Safe for
// concurrent use.
//
// A Redis that loses the record (restart without persistence, failover,
// eviction: use a noeviction policy) forgets the highest token and accepts
// a stale one once; a Postgres fence (NewPostgresFence) does not.
type RedisFence struct {
	rdb    redis.Scripter
	prefix string
}

// NewRedisFence returns a RedisFence on rdb whose keys start with prefix
// (DefaultRedisFencePrefix when empty).
func NewRedisFence(rdb redis.Scripter, prefix string) *RedisFence {
	if prefix == "" {
		prefix = DefaultRedisFencePrefix
	}
	return &RedisFence{rdb: rdb, prefix: prefix}
}

// Accept implements FenceStore.
func (f *RedisFence) Accept(ctx context.Context, resource string, h fence.Holder) error {
	if h.Token == fence.None {
		return fmt.Errorf("httpfence: fence %q: %w", resource, fence.ErrNoToken)
	}
	key := hashedKey(f.prefix, resource) // scope "": the pre-scope name
	if h.Scope != "" {
		key = hashedKey(f.prefix, strconv.Itoa(len(h.Scope))+":"+h.Scope+":"+resource)
	}
	res, err := fenceScript.Run(ctx, f.rdb, []string{key}, h.Token.String(), h.Owner, resource, h.Scope).Slice()
	if err != nil {
		return fmt.Errorf("httpfence: redis fence %q: %w", resource, err)
	}
	if len(res) == 1 {
		return nil
	}
	cur, ok := res[1].(string)
	if !ok || len(res) != 2 {
		return fmt.Errorf("httpfence: redis fence %q: unexpected reply %v", resource, res)
	}
	current, err := fence.ParseToken(cur)
	if err != nil {
		return fmt.Errorf("httpfence: redis fence %q: stored token: %w", resource, err)
	}
	return &fence.StaleTokenError{Resource: resource, Scope: h.Scope, Presented: h.Token, Current: current}
}
