package redislease

import "github.com/holdfast-go/holdfast/internal/redispolicy"

// Eviction configures how the Redis backend treats a Redis that may evict
// keys (Options.Eviction, lease.Options.Eviction). The zero value reads
// maxmemory-policy with CONFIG GET before the first acquisition (and again
// a minute after each read that passed) and refuses a Redis that may evict
// keys (ErrEvictionPolicy) or whose policy cannot be read
// (ErrEvictionPolicyUnknown). Fields:
//
//   - Policy declares maxmemory-policy where CONFIG GET is refused
//     (managed Redis): "noeviction", or any other Redis policy name,
//     which counts as evicting. Default "": read it.
//   - AllowEviction runs on a Redis that may evict keys: the Client then
//     counts evictions (INFO stats evicted_keys) on its renewal passes, at
//     most once a second, logs redis_evictions, tells its
//     lease.Observer (ObserveEvictions), and a lease whose key was evicted
//     is lost with a cause matching both lease.ErrNotHeld and
//     lease.ErrEvicted (a Redis that refuses INFO too runs with nothing
//     counted). Default false.
//
// It is shared by the Redis ledger and the Redis sinks (redisledger,
// redisfence, redisstore), which take the same type.
type Eviction = redispolicy.Options

// Errors of the eviction-policy check, the same values as those of
// scheduler/ledger/redisledger, sinks/redisfence and
// sinks/httpfence/redisstore.
var (
	// ErrEvictionPolicy is returned by the first acquisitions on a Redis
	// that may evict keys (maxmemory set and maxmemory-policy not
	// noeviction) without Eviction.AllowEviction. Its text says what to
	// set.
	ErrEvictionPolicy = redispolicy.ErrEvictionPolicy
	// ErrEvictionPolicyUnknown is returned by the first acquisitions on a
	// Redis that refuses CONFIG GET (managed Redis) when Eviction.Policy
	// does not declare the policy.
	ErrEvictionPolicyUnknown = redispolicy.ErrPolicyUnknown
	// ErrRedisMemoryFull matches an acquisition Redis refused with OOM:
	// its memory is full and its policy (noeviction) frees none.
	ErrRedisMemoryFull = redispolicy.ErrMemoryFull
)
