package lease

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"

	"github.com/holdfast-go/holdfast/internal/safe"
)

// Defaults for Options and limits on input.
const (
	// DefaultPrefix starts every key the client writes.
	DefaultPrefix = "holdfast:lease:"
	// DefaultRetryMax caps the wait between two attempts of a blocked
	// Acquire (1 s).
	DefaultRetryMax = time.Second
	// DefaultRetryMin is the shortest wait between two attempts of a
	// blocked Acquire (5 ms).
	DefaultRetryMin = 5 * time.Millisecond
	// MinTTL is the shortest TTL a lease may have (10 ms).
	MinTTL = 10 * time.Millisecond
	// MaxNameLen is the longest lease name in bytes.
	MaxNameLen = 256
	// MaxHolderLen is the longest holder label (Options.Holder) in bytes.
	MaxHolderLen = 256
	// DefaultBatchSize is how many leases one renewal round trip carries.
	DefaultBatchSize = 1000
)

// Options configure a Client. The zero value is valid: every field has a
// default.
type Options struct {
	// Prefix starts every key of the Redis backend New builds
	// (RedisOptions.Prefix). Default DefaultPrefix. It must not hold '{'
	// or '}': the lease name is the Cluster hash tag. NewWithBackend
	// refuses it: its backend's keys are the backend's own.
	Prefix string
	// RetryMin and RetryMax bound the jittered wait between two attempts
	// of a blocked Acquire. The wait follows the holder's remaining TTL
	// within these bounds. Defaults DefaultRetryMin (5 ms) and
	// DefaultRetryMax (1 s).
	RetryMin, RetryMax time.Duration
	// Logger receives lease_acquired, lease_renewed (debug), lease_lost
	// and lease_released events. Default: discard.
	Logger *slog.Logger
	// Observer receives measurements (see package lease/leaseprom).
	// Default: none.
	Observer Observer
	// BatchSize is how many leases the keep-alive renews in one round
	// trip (a pipeline). Default DefaultBatchSize (1000).
	BatchSize int
	// ReplicaAck configures the replica acknowledgements of the Redis
	// backend New builds (see RedisOptions.ReplicaAck). NewWithBackend
	// refuses it.
	ReplicaAck ReplicaAck
	// Eviction configures the eviction-policy check of the Redis backend
	// New builds (see RedisOptions.Eviction and Eviction): by default a
	// Redis that may evict keys is refused. NewWithBackend refuses it.
	Eviction Eviction
	// Holder is the holder label: the replica's name (a hostname, a pod
	// name), stored beside every lease the Client takes and shown by the
	// lease views (Inspector, the admin API's /leases, holdfast leases)
	// and in the Client's log events, where the owner is not: the owner is
	// a write capability (see fence.OwnerID). It is a label for people,
	// not an identity: nothing checks it, and several replicas may share
	// one. At most MaxHolderLen bytes of UTF-8 without control or format
	// characters. Default "" (no label). New passes it to the Redis
	// backend (RedisOptions.Holder); NewWithBackend takes the backend's
	// own (RedisOptions.Holder, pglease.Options.Holder) and refuses a
	// different one here.
	Holder string
}

// ReplicaAck configures RedisOptions.ReplicaAck (Options.ReplicaAck).
type ReplicaAck struct {
	// Replicas is how many replicas must acknowledge; 0 disables.
	Replicas int
	// Timeout bounds the wait. Default 100 ms.
	Timeout time.Duration
}

func (o Options) withDefaults() Options {
	if o.RetryMin == 0 {
		o.RetryMin = DefaultRetryMin
	}
	if o.RetryMax == 0 {
		o.RetryMax = DefaultRetryMax
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.BatchSize == 0 {
		o.BatchSize = DefaultBatchSize
	}
	return o
}

func (o Options) validate() error {
	if o.BatchSize < 0 {
		return fmt.Errorf("%w: negative BatchSize", ErrInvalidOptions)
	}
	if o.RetryMin < 0 || o.RetryMax < o.RetryMin {
		return fmt.Errorf("%w: want 0 <= RetryMin <= RetryMax, got %v and %v", ErrInvalidOptions, o.RetryMin, o.RetryMax)
	}
	return nil
}

// AcquireOption configures one acquisition: a call of Acquire, TryAcquire
// or TryAcquireAll (and election.Campaign).
type AcquireOption func(*acquireConfig)

type acquireConfig struct {
	lifetime context.Context // nil: the lease lives until Release or loss
}

func newAcquireConfig(opts []AcquireOption) acquireConfig {
	if len(opts) == 0 {
		// Before cfg, which the options' closures make escape: a call
		// without options allocates nothing here.
		return acquireConfig{}
	}
	cfg := new(acquireConfig)
	for _, o := range opts {
		if o != nil {
			o(cfg)
		}
	}
	return *cfg
}

// WithLifetime ties the lease to ctx: when ctx ends, the lease is lost
// with ErrParentDone (joined with context.Cause(ctx)) and its key is
// released, bounded by the TTL. Pass a service's lifetime context so that
// shutdown ends its leases. Without it a lease lives until Release or loss
// (the context of the acquire call only bounds the wait, as in
// bsm/redislock, redsync and etcd's Mutex.Lock). A ctx that has already
// ended loses the lease at once; a nil ctx is ignored.
func WithLifetime(ctx context.Context) AcquireOption {
	return func(c *acquireConfig) {
		if ctx != nil {
			c.lifetime = ctx
		}
	}
}

func validateName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty", ErrInvalidName)
	case len(name) > MaxNameLen:
		return fmt.Errorf("%w: %d bytes, at most %d", ErrInvalidName, len(name), MaxNameLen)
	case strings.ContainsAny(name, "{}"):
		return fmt.Errorf("%w: %q holds '{' or '}'", ErrInvalidName, name)
	case !safe.Printable(name):
		return fmt.Errorf("%w: %q is not UTF-8 without control or format characters", ErrInvalidName, name)
	case safe.Blank(name):
		return fmt.Errorf("%w: %q is blank", ErrInvalidName, name)
	}
	return nil
}

// CheckHolder returns an error matching ErrInvalidOptions unless label is
// a valid holder label (Options.Holder): at most MaxHolderLen bytes of
// UTF-8 without control or format characters, so that a label cannot pass
// for another in a view. "" (no label) is valid. Backends that store the
// label check it with this function.
func CheckHolder(label string) error {
	switch {
	case len(label) > MaxHolderLen:
		return fmt.Errorf("%w: Holder of %d bytes, at most %d", ErrInvalidOptions, len(label), MaxHolderLen)
	case label != "" && strings.TrimSpace(label) == "":
		return fmt.Errorf("%w: Holder %q is blank", ErrInvalidOptions, label)
	case !safe.Printable(label) || strings.ContainsFunc(label, isFormat):
		return fmt.Errorf("%w: Holder %q is not UTF-8 without control or format characters", ErrInvalidOptions, label)
	}
	return nil
}

// isFormat reports a format character (Unicode Cf: zero-width space,
// right-to-left override, ...), which would let one label look like another.
func isFormat(r rune) bool { return unicode.Is(unicode.Cf, r) }

func validateTTL(ttl time.Duration) error {
	if ttl < MinTTL {
		return fmt.Errorf("%w: %v, at least %v", ErrInvalidTTL, ttl, MinTTL)
	}
	return nil
}

// Drift is the margin taken off a TTL to form the trust window: 1% of the
// TTL plus 2 ms, for clock-rate differences between this process and Redis
// and for the time the reply spends on the wire.
func Drift(ttl time.Duration) time.Duration { return ttl/100 + 2*time.Millisecond }

// RenewInterval is how often the keep-alive renews a lease of the given
// TTL: TTL/3, so two renewals can fail before the trust window ends.
func RenewInterval(ttl time.Duration) time.Duration { return ttl / 3 }
