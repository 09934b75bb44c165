package redisfence

import (
	"context"
	"errors"
	"fmt"

	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/internal/redispolicy"
)

// Errors for bad input, returned before Redis is contacted and matched with
// errors.Is. A token of 0 is refused with fence.ErrNoToken.
var (
	// ErrInvalidKey is returned for an empty key or key list, for a key
	// in a reserved key space (ErrReservedKey), and, on a
	// *redis.ClusterClient, for a resource key without a hash tag (see the
	// package documentation, "Key layout").
	ErrInvalidKey = errors.New("redisfence: invalid key")

	// ErrReservedKey is returned for a key in a reserved key space: one
	// that starts with Namespace ("holdfast:", which holds FencePrefix and
	// the default keys of holdfast's other stores) or a prefix of
	// Options.Reserved, where no resource (nor any key of Eval) may lie,
	// so that no write reaches a fence, lease, ledger or idempotency
	// record. Errors matching it match ErrInvalidKey too.
	ErrReservedKey = errors.New("redisfence: key in a reserved key space")

	// ErrInvalidOwner is returned for an empty owner.
	ErrInvalidOwner = errors.New("redisfence: invalid owner")

	// ErrInvalidTTL is returned by Set for a negative TTL other than
	// KeepTTL.
	ErrInvalidTTL = errors.New("redisfence: invalid TTL")

	// ErrInvalidUnit is returned by PruneSlotScopes for an empty unit.
	ErrInvalidUnit = errors.New("redisfence: invalid unit")

	// ErrNoFields is returned by HSet for an empty field map.
	ErrNoFields = errors.New("redisfence: no fields to set")

	// ErrInvalidClient is returned by New for a nil redis client.
	ErrInvalidClient = errors.New("redisfence: nil redis client")

	// ErrInvalidOptions is returned by NewWithOptions for bad Options.
	ErrInvalidOptions = fmt.Errorf("redisfence: %w", errfamily.ErrInvalidOptions)

	// ErrNotCreated is returned by the methods of a Writer not made by New.
	ErrNotCreated = fmt.Errorf("redisfence: writer %w", errfamily.ErrNotCreated)

	// ErrNilContext is returned for a nil context.Context.
	ErrNilContext = fmt.Errorf("redisfence: %w", errfamily.ErrNilContext)

	// ErrUnexpectedReply is returned when a script answers in a shape this
	// package does not know: a server or proxy that changed the reply.
	ErrUnexpectedReply = errors.New("redisfence: unexpected reply from script")
)

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

// wrapRedisError annotates an error from Redis with the operation and key.
// When ctx has ended, its error is joined so that errors.Is finds both the
// Redis error and context.Canceled or context.DeadlineExceeded.
//
// After such an error the write may or may not have been applied. Running
// it again with the same token and owner is safe: the rule accepts the same
// holder again, and a newer holder's write refuses it.
func wrapRedisError(ctx context.Context, op, key string, err error) error {
	err = redispolicy.MemoryFull(err)
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		err = errors.Join(err, ctxErr)
	}
	return fmt.Errorf("redisfence: %s %q: %w", op, key, err)
}
