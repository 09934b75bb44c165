package lease

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

// The defaults of Options, stated on its fields.
const (
	defaultRetryMax  = time.Second
	defaultRetryMin  = 5 * time.Millisecond
	defaultBatchSize = 1000
)

// Options configure a Client. The zero value is valid: every field has a
// default.
type Options struct {
	// Prefix starts every key of the Redis backend New builds
	// (redislease.Options.Prefix). Default redislease.DefaultPrefix. It must not hold '{'
	// or '}': the lease name is the Cluster hash tag. NewWithBackend
	// refuses it: its backend's keys are the backend's own.
	Prefix string
	// RetryMin and RetryMax bound the jittered wait between two attempts
	// of a blocked Acquire. The wait follows the holder's remaining TTL
	// within these bounds. Zero means the default: RetryMin 5 ms,
	// RetryMax 1 s. Negative, or RetryMax below RetryMin: ErrInvalidOptions.
	RetryMin, RetryMax time.Duration
	// Logger receives lease_acquired, lease_renewed (debug), lease_lost
	// and lease_released events. Default: discard.
	Logger *slog.Logger
	// Observer receives measurements (lease/leaseprom.Observer turns
	// them into Prometheus collectors). Default: none.
	Observer Observer
	// BatchSize is how many leases the keep-alive renews in one round
	// trip (a pipeline). Zero means the default, 1000; negative:
	// ErrInvalidOptions.
	BatchSize int
	// ReplicaAck configures the replica acknowledgements of the Redis
	// backend New builds (see redislease.Options.ReplicaAck). NewWithBackend
	// refuses it.
	ReplicaAck redislease.ReplicaAck
	// Eviction configures the eviction-policy check of the Redis backend
	// New builds (see redislease.Options.Eviction and redislease.Eviction): by default a
	// Redis that may evict keys is refused. NewWithBackend refuses it.
	Eviction redislease.Eviction
	// Holder is the holder label: the replica's name (a hostname, a pod
	// name), stored beside every lease the Client takes and shown by the
	// lease views (Inspector, the admin API's /leases, holdfast lease)
	// and in the Client's log events, where the owner is not: the owner is
	// a write capability (see fence.OwnerID). It is a label for people,
	// not an identity: nothing checks it, and several replicas may share
	// one. At most leasedriver.MaxHolderLen bytes of UTF-8 without control or format
	// characters. Default "" (no label). New passes it to the Redis
	// backend (redislease.Options.Holder); NewWithBackend takes the backend's
	// own (redislease.Options.Holder, pglease.Options.Holder) and refuses a
	// different one here.
	Holder string
	// TracerProvider gives the tracer of the Client's spans
	// (holdfast.lease.acquire, holdfast.lease.renew, holdfast.lease.lost;
	// docs/operations.md, "Traces"); set, every acquisition is traced.
	// Default otel.GetTracerProvider() (no spans until the application
	// installs an SDK), and then an acquisition is traced only when its
	// ctx carries a recording span: an untraced process pays no
	// allocation per acquisition.
	TracerProvider trace.TracerProvider
}

func (o Options) withDefaults() Options {
	if o.RetryMin == 0 {
		o.RetryMin = defaultRetryMin
	}
	if o.RetryMax == 0 {
		o.RetryMax = defaultRetryMax
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.BatchSize == 0 {
		o.BatchSize = defaultBatchSize
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

// drift is leasedriver.Drift: the margin taken off a TTL to form the trust
// window (1% of the TTL + 2 ms).
func drift(ttl time.Duration) time.Duration { return leasedriver.Drift(ttl) }

// renewInterval is how often the keep-alive renews a lease of the given
// TTL: TTL/3, so two renewals can fail before the trust window ends.
func renewInterval(ttl time.Duration) time.Duration { return ttl / 3 }
