package redisfence

import (
	"context"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/autopipe"
	"github.com/holdfast-go/holdfast/internal/formatver"
	"github.com/holdfast-go/holdfast/internal/ownerarg"
	"github.com/holdfast-go/holdfast/internal/redispolicy"
)

// Namespace starts the default keys of every holdfast store in Redis
// (lease "holdfast:lease:", redisledger "holdfast:ledger:", httpfence's
// redisstore "holdfast:idem:" and "holdfast:fence:") and FencePrefix. It is
// reserved: a resource key (or any key of Eval) that starts with it is
// refused with ErrReservedKey, so no write through a Writer reaches a fence,
// a lease, a ledger record or an idempotency record. Stores given a prefix
// outside it are protected only when listed in Options.Reserved.
const Namespace = "holdfast:"

// FencePrefix starts every fence key, the hash that holds a resource's
// fence state, one fence per scope (see "Key layout"). It lies in the
// reserved Namespace, so no resource is a fence key and no write reaches a
// fence's state.
const FencePrefix = Namespace + "redisfence:"

// KeepTTL, given to Set as the TTL, keeps the key's current time to live
// (SET ... KEEPTTL). It equals redis.KeepTTL.
const KeepTTL = redis.KeepTTL

// Writer makes fenced writes to Redis: each write runs in one Lua script
// that applies the acceptance rule to the resource's fence state and, only
// when it passes, raises the state and writes. It holds no connection and
// no goroutine of its own; it is safe for concurrent use.
type Writer struct {
	client  redis.UniversalClient
	auto    *autopipe.Pipe // the scripts of concurrent writes, batched
	cluster bool           // keys must carry a hash tag
	policy  *redispolicy.Checker
	reserve []string       // Namespace and Options.Reserved
	format  formatver.Gate // the stored format, checked on first use (checkFormat)
}

// store names the package in format markers and errors.
const store = "sinks/redisfence"

// Options configure a Writer (NewWithOptions). The zero value is valid.
type Options struct {
	// Eviction: the zero value reads maxmemory-policy (CONFIG GET, before
	// the first write and again a minute after each read that passed)
	// and refuses a Redis that may evict keys
	// (ErrEvictionPolicy) or refuses CONFIG GET (ErrEvictionPolicyUnknown):
	// an evicted fence key forgets the highest token, and a stale holder's
	// write is then accepted once. See redislease.Eviction for declaring the
	// policy (managed Redis) or running anyway.
	Eviction Eviction

	// Reserved lists further key prefixes no resource key (nor any key of
	// Eval) may start with, refused with ErrReservedKey like Namespace:
	// the prefixes of holdfast stores in the same Redis that were given
	// one outside Namespace (lease.Options.Prefix,
	// redisledger.Options.Prefix, redisstore's prefixes). Default: none
	// (Namespace alone). An empty prefix is refused (ErrInvalidOptions).
	Reserved []string
}

// Eviction configures the eviction-policy check; it is redislease.Eviction.
type Eviction = redispolicy.Options

// New returns a Writer over client: a *redis.Client, *redis.ClusterClient,
// *redis.Ring, a failover client or any redis.UniversalClient. On a
// *redis.ClusterClient every resource key must carry a hash tag (see "Key
// layout" in the package documentation). It returns an error matching
// ErrInvalidClient for a nil client (a typed nil *redis.Client too).
func New(client redis.UniversalClient) (*Writer, error) {
	return NewWithOptions(client, Options{})
}

// NewWithOptions is New with options. It also returns an error matching
// ErrInvalidOptions for an Eviction.Policy that is not a Redis policy or an
// empty Reserved prefix. It
// sends nothing: the eviction policy is read before the first write.
func NewWithOptions(client redis.UniversalClient, opts Options) (*Writer, error) {
	if client == nil || (reflect.ValueOf(client).Kind() == reflect.Pointer && reflect.ValueOf(client).IsNil()) {
		return nil, ErrInvalidClient
	}
	if err := opts.Eviction.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	reserve := []string{Namespace}
	for _, p := range opts.Reserved {
		if p == "" {
			return nil, fmt.Errorf("%w: Reserved holds an empty prefix, which would refuse every key", ErrInvalidOptions)
		}
		reserve = append(reserve, p)
	}
	_, cluster := client.(*redis.ClusterClient)
	return &Writer{client: client, auto: autopipe.New(client), cluster: cluster,
		policy: redispolicy.New(client, opts.Eviction, "redisfence.Options.Eviction"), reserve: reserve}, nil
}

// checkPolicy reads the eviction policy unless done before.
func (w *Writer) checkPolicy(ctx context.Context) error {
	if err := w.policy.Check(ctx); err != nil {
		return fmt.Errorf("redisfence: %w", err)
	}
	return w.checkFormat(ctx)
}

// checkFormat checks the stored format unless done before: the marker key
// FencePrefix + "format" ("holdfast:redisfence:format", no resource key:
// those never start with Namespace) must hold "holdfast sinks/redisfence
// format 1" (written there when missing), or every call fails with a
// *fence.FormatError (fence.ErrUnknownFormat): fence state of a newer
// build's format (docs/compatibility.md). Writes call it through
// checkPolicy, Reset first; Current, a read, checks the marker without
// writing it (formatver.RedisRead).
func (w *Writer) checkFormat(ctx context.Context) error {
	if w.format.Passed() {
		return nil
	}
	return w.format.Check(ctx, func(ctx context.Context) error {
		return formatver.Redis(ctx, w.client, store, FencePrefix)
	})
}

// FenceKey returns the key of the hash that holds key's fence state:
// FencePrefix + "{" + tag + "}:" + key, where tag is key's Redis Cluster
// hash tag ("" when it has none), so that on Cluster the fence key hashes
// to key's slot. The tag holds no '}', so the first '}' after FencePrefix
// ends it and the rest is key: two keys never share a fence key, and no
// fence key is a resource key (those never start with FencePrefix).
func FenceKey(key string) string {
	return FencePrefix + "{" + hashTag(key) + "}:" + key
}

// Set sets key to value, iff holder h passes the rule for key's fence of
// h.Scope, atomically with the check. Holders of other scopes (other
// leases) have fences of their own in the same fence key and are neither
// compared with h nor refused by it. ttl is the value key's time to live:
// 0 for none (any previous TTL is removed, as SET does), KeepTTL to keep the
// key's current one, else rounded down to milliseconds (1 ms at least). The
// fence key never expires (see "Key layout").
//
// value is encoded as go-redis encodes command arguments: string, []byte,
// numbers, bool, time.Time, encoding.BinaryMarshaler.
//
// It returns nil when written, a *fence.StaleTokenError (Resource = key,
// Scope = h.Scope) when refused (with ClosedBefore set, matching
// fence.ErrScopeClosed, when h.Scope is a slot scope closed by
// PruneSlotScopes), an input error (fence.ErrNoToken,
// ErrInvalidKey, ErrInvalidOwner, ErrInvalidTTL) before contacting Redis,
// or a wrapped Redis error.
func (w *Writer) Set(ctx context.Context, key string, value any, h fence.Holder, ttl time.Duration) error {
	if err := w.validate(ctx, key, h); err != nil {
		return err
	}
	var px string
	switch {
	case ttl == 0:
		px = "0"
	case ttl == KeepTTL:
		px = "-1"
	case ttl < 0:
		return fmt.Errorf("%w: %v: want > 0, 0 (none) or KeepTTL", ErrInvalidTTL, ttl)
	default:
		px = strconv.FormatInt(max(ttl, time.Millisecond).Milliseconds(), 10)
	}
	if err := w.checkPolicy(ctx); err != nil {
		return err
	}
	reply, err := setScript.Run(ctx, w.auto, []string{key, FenceKey(key)}, h.Token.String(), ownerarg.Owner(h.Owner), h.Scope, value, px).Slice()
	if err != nil {
		return wrapRedisError(ctx, "fenced set of", key, err)
	}
	_, err = outcome(key, h, reply)
	return err
}

// HSet sets fields of the hash at key, iff holder h passes the rule for
// key's fence of h.Scope, atomically with the check. fields must not be
// empty. Return values as for Set (ErrNoFields for an empty map).
func (w *Writer) HSet(ctx context.Context, key string, fields map[string]string, h fence.Holder) error {
	if err := w.validate(ctx, key, h); err != nil {
		return err
	}
	if len(fields) == 0 {
		return fmt.Errorf("%w: key %q", ErrNoFields, key)
	}
	args := make([]any, 0, 3+2*len(fields))
	args = append(args, h.Token.String(), ownerarg.Owner(h.Owner), h.Scope)
	for f, v := range fields {
		args = append(args, f, v)
	}
	if err := w.checkPolicy(ctx); err != nil {
		return err
	}
	reply, err := hsetScript.Run(ctx, w.auto, []string{key, FenceKey(key)}, args...).Slice()
	if err != nil {
		return wrapRedisError(ctx, "fenced hset of", key, err)
	}
	_, err = outcome(key, h, reply)
	return err
}

// Eval runs script with keys and args, iff holder h passes the rule for
// the fence of h.Scope of keys[0], the fenced resource; the check, the
// raise of the fence and the script run in one script invocation. It
// returns what the script's body returned (nil for nil or false), a
// *fence.StaleTokenError (Resource = keys[0], Scope = h.Scope) when
// refused, an input error, or a wrapped Redis error (an error the body
// raised comes back this way).
//
// All keys must hash to one slot on Cluster: give them keys[0]'s hash tag.
func (w *Writer) Eval(ctx context.Context, script *Script, keys []string, h fence.Holder, args ...any) (any, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: Eval needs at least the resource key", ErrInvalidKey)
	}
	if err := w.validate(ctx, keys[0], h); err != nil {
		return nil, err
	}
	if script == nil || script.script == nil {
		return nil, fmt.Errorf("redisfence: Eval of %q: nil script, use NewScript", keys[0])
	}
	for _, k := range keys[1:] {
		if err := w.reserved(k); err != nil {
			return nil, err
		}
	}
	allKeys := make([]string, 0, len(keys)+1)
	allKeys = append(append(allKeys, keys...), FenceKey(keys[0]))
	allArgs := make([]any, 0, len(args)+3)
	allArgs = append(append(allArgs, h.Token.String(), ownerarg.Owner(h.Owner), h.Scope), args...)
	if err := w.checkPolicy(ctx); err != nil {
		return nil, err
	}
	reply, err := script.script.Run(ctx, w.auto, allKeys, allArgs...).Slice()
	if err != nil {
		return nil, wrapRedisError(ctx, "fenced eval on", keys[0], err)
	}
	return outcome(keys[0], h, reply)
}

// Current returns the token and owner stored for key's fence of scope, or
// (fence.None, "", nil) when no write of that scope was ever accepted. It
// takes no lock: another holder may raise the token right after.
func (w *Writer) Current(ctx context.Context, key, scope string) (fence.Token, string, error) {
	if err := w.ready(ctx); err != nil {
		return fence.None, "", err
	}
	if err := w.validateKey(key); err != nil {
		return fence.None, "", err
	}
	if !w.format.Passed() {
		// A read writes no marker: an operator's read (holdfast fence get
		// redis) of a Redis this Writer never wrote to, or would refuse to
		// (an evicting one), leaves it as it was.
		if err := formatver.RedisRead(ctx, w.client, store, FencePrefix); err != nil {
			return fence.None, "", err
		}
	}
	reply, err := currentScript.Run(ctx, w.auto, []string{FenceKey(key)}, scope).Slice()
	if err != nil {
		return fence.None, "", wrapRedisError(ctx, "read fence of", key, err)
	}
	if len(reply) != 2 || reply[0] == nil {
		return fence.None, "", nil
	}
	token, err := parseToken(reply[0])
	if err != nil {
		return fence.None, "", fmt.Errorf("redisfence: fence of %q: %w", key, err)
	}
	owner, _ := reply[1].(string)
	return token, owner, nil
}

// outcome interprets a write script's reply: {1[, result]} accepted, {0,
// stored token} refused by the rule, {2, watermark} refused because the
// scope is a closed slot scope.
func outcome(key string, h fence.Holder, reply []any) (any, error) {
	if len(reply) == 0 {
		return nil, fmt.Errorf("%w: empty reply for %q", ErrUnexpectedReply, key)
	}
	switch reply[0] {
	case int64(1):
		if len(reply) < 2 {
			return nil, nil
		}
		if err, ok := reply[1].(error); ok { // the body returned an error reply
			return nil, fmt.Errorf("redisfence: fenced eval on %q: %w", key, err)
		}
		return reply[1], nil
	case int64(0):
		if len(reply) != 2 {
			break
		}
		current, err := parseToken(reply[1])
		if err != nil {
			return nil, fmt.Errorf("redisfence: fence of %q: %w", key, err)
		}
		return nil, &fence.StaleTokenError{Resource: key, Scope: h.Scope, Presented: h.Token, Current: current}
	case int64(2):
		if len(reply) != 2 {
			break
		}
		return nil, closedOutcome(key, h, reply[1])
	}
	return nil, fmt.Errorf("%w: %v for %q", ErrUnexpectedReply, reply, key)
}

// parseToken reads a token stored in a fence hash.
func parseToken(v any) (fence.Token, error) {
	s, ok := v.(string)
	if !ok {
		return fence.None, fmt.Errorf("%w: stored token %v (%T)", ErrUnexpectedReply, v, v)
	}
	t, err := fence.ParseToken(s)
	if err != nil {
		return fence.None, fmt.Errorf("%w: stored token: %w", ErrUnexpectedReply, err)
	}
	return t, nil
}

func (w *Writer) ready(ctx context.Context) error {
	if w == nil || w.client == nil {
		return ErrNotCreated
	}
	if ctx == nil {
		return ErrNilContext
	}
	return nil
}

func (w *Writer) validate(ctx context.Context, key string, h fence.Holder) error {
	if err := w.ready(ctx); err != nil {
		return err
	}
	if err := w.validateKey(key); err != nil {
		return err
	}
	if h.Owner == "" {
		return fmt.Errorf("%w: empty (key %q)", ErrInvalidOwner, key)
	}
	if h.Token == fence.None {
		return fmt.Errorf("redisfence: write of %q: %w", key, fence.ErrNoToken)
	}
	return nil
}

func (w *Writer) validateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if err := w.reserved(key); err != nil {
		return err
	}
	if w.cluster && hashTag(key) == "" {
		return fmt.Errorf("%w: %q has no hash tag: on Cluster the key and its fence key %q must share one, e.g. \"settlement:{2026-03-08}\"",
			ErrInvalidKey, key, FenceKey(key))
	}
	return nil
}

// reserved refuses a key in a reserved key space: Namespace (holdfast's
// stores, fences included) or a prefix of Options.Reserved. Only the key's
// own start counts, not its hash tag.
func (w *Writer) reserved(key string) error {
	for _, p := range w.reserve {
		if strings.HasPrefix(key, p) {
			return fmt.Errorf("%w: %w: %q starts with %q", ErrInvalidKey, ErrReservedKey, key, p)
		}
	}
	return nil
}

// hashTag returns the part of key Redis Cluster hashes when it has a tag:
// the text between the first '{' and the next '}', when not empty; else
// "". A hash tag never holds '}'.
func hashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return ""
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 {
		return ""
	}
	return key[open+1 : open+1+end]
}
