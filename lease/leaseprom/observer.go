package leaseprom

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/lease"
)

// ErrInvalidOptions is returned by New for buckets that do not strictly
// increase.
var ErrInvalidOptions = fmt.Errorf("leaseprom: %w", errfamily.ErrInvalidOptions)

// DefaultNamespace starts every metric name unless Options.Namespace is set.
const DefaultNamespace = "holdfast"

// DefaultBuckets are the latency histogram buckets, in seconds: 0.25 ms to
// about 4 s, doubling. A lease round trip takes well under a millisecond
// on loopback and a few on a network; the top buckets catch a struggling
// Redis before the trust window (a fraction of the TTL) runs out.
var DefaultBuckets = prometheus.ExponentialBuckets(0.00025, 2, 15)

// Options configure an Observer. The zero value is valid.
type Options struct {
	// Namespace is the first part of every metric name. Default
	// DefaultNamespace ("holdfast").
	Namespace string
	// Buckets are the upper bounds, in seconds, of both latency
	// histograms. Default DefaultBuckets.
	Buckets []float64
}

// Label values. Bounded sets, as labels must be.
const (
	resultOK      = "ok"
	resultNotHeld = "not_held"
	resultError   = "error"

	causeReleased   = "released"
	causeNotHeld    = "not_held"
	causeExpired    = "expired"
	causeParentDone = "parent_done"
	causeOther      = "other"

	outcomeAcquired = "acquired"
	outcomeHeld     = "held"
	outcomeError    = "error"
	outcomeSlow     = "slow"
)

// Observer records lease measurements as Prometheus metrics. It implements
// lease.Observer and prometheus.Collector, and is safe for concurrent use.
// Create it with New.
type Observer struct {
	acquireTotal    *prometheus.CounterVec
	acquireDuration prometheus.Histogram
	renewTotal      *prometheus.CounterVec
	renewDuration   prometheus.Histogram
	lostTotal       *prometheus.CounterVec
	held            prometheus.Gauge
	redisEvicted    prometheus.Counter
}

var (
	_ lease.Observer       = (*Observer)(nil)
	_ prometheus.Collector = (*Observer)(nil)
)

// New returns an Observer with its metrics at zero. It registers
// nothing: pass it to a prometheus.Registerer yourself. It returns an error
// matching ErrInvalidOptions for Buckets that do not strictly increase.
func New(opts Options) (*Observer, error) {
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.Buckets == nil {
		opts.Buckets = DefaultBuckets
	}
	for i := 1; i < len(opts.Buckets); i++ {
		if !(opts.Buckets[i] > opts.Buckets[i-1]) {
			return nil, fmt.Errorf("%w: Buckets %v: want strictly increasing", ErrInvalidOptions, opts.Buckets)
		}
	}
	ns := opts.Namespace
	o := &Observer{
		acquireTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "lease", Name: "acquire_total",
			Help: "Lease acquire attempts (one Redis round trip each), by outcome: acquired, held (by another owner), error or slow (granted after its trust window ended, refused).",
		}, []string{"outcome"}),
		acquireDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: "lease", Name: "acquire_duration_seconds",
			Help:    "Duration of one lease acquire attempt, whatever its outcome.",
			Buckets: opts.Buckets,
		}),
		renewTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "lease", Name: "renew_total",
			Help: "Lease renewals, one per lease, by result: ok, not_held (Redis says another owner holds it) or error.",
		}, []string{"result"}),
		renewDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: ns, Subsystem: "lease", Name: "renew_duration_seconds",
			Help:    "Duration of the renew call that carried a lease (a whole batch's round trip for batched renewals).",
			Buckets: opts.Buckets,
		}),
		lostTotal: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "lease", Name: "lost_total",
			Help: "Leases ended, by cause: released, not_held, expired (trust window ended), parent_done or other.",
		}, []string{"cause"}),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: "lease", Name: "held",
			Help: "Leases held right now by the observed clients.",
		}),
		redisEvicted: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "lease", Name: "redis_evicted_keys_total",
			Help: "Keys Redis evicted (INFO stats evicted_keys) while the observed clients held leases on a Redis allowed to evict (redislease.Eviction.AllowEviction). Any increase means a lease may have been taken while its holder believed it held it.",
		}),
	}
	// Export every label value from the start, so that rate() sees the
	// first increment and absent() is meaningful.
	for _, v := range []string{outcomeAcquired, outcomeHeld, outcomeError, outcomeSlow} {
		o.acquireTotal.WithLabelValues(v)
	}
	for _, v := range []string{resultOK, resultNotHeld, resultError} {
		o.renewTotal.WithLabelValues(v)
	}
	for _, v := range []string{causeReleased, causeNotHeld, causeExpired, causeParentDone, causeOther} {
		o.lostTotal.WithLabelValues(v)
	}
	return o, nil
}

// ObserveAcquire implements lease.Observer.
func (o *Observer) ObserveAcquire(_ string, err error, took time.Duration) {
	outcome := acquireOutcome(err)
	o.acquireTotal.WithLabelValues(outcome).Inc()
	o.acquireDuration.Observe(took.Seconds())
	if outcome == outcomeAcquired {
		o.held.Inc()
	}
}

// acquireOutcome returns the acquire_total label value for an attempt's
// error: "acquired" (nil), "held" (lease.ErrNotAcquired), "slow"
// (lease.ErrSlowAcquire: granted after its trust window ended, undone) or
// "error" (any other), a bounded set.
func acquireOutcome(err error) string {
	switch {
	case err == nil:
		return outcomeAcquired
	case errors.Is(err, lease.ErrNotAcquired):
		return outcomeHeld
	case errors.Is(err, lease.ErrSlowAcquire):
		return outcomeSlow
	}
	return outcomeError
}

// ObserveRenew implements lease.Observer.
func (o *Observer) ObserveRenew(_ string, err error, took time.Duration) {
	result := resultOK
	switch {
	case err == nil:
	case errors.Is(err, lease.ErrNotHeld):
		result = resultNotHeld
	default:
		result = resultError
	}
	o.renewTotal.WithLabelValues(result).Inc()
	o.renewDuration.Observe(took.Seconds())
}

// ObserveLoss implements lease.Observer. Every acquired lease ends exactly
// once, so the held gauge goes back down here.
func (o *Observer) ObserveLoss(_ string, reason error) {
	o.lostTotal.WithLabelValues(cause(reason)).Inc()
	o.held.Dec()
}

// cause returns the lost_total label value for the reason a lease ended:
// "released", "not_held", "expired", "parent_done" or "other". ParentDone
// is tested first: its reason also carries the parent's own cause, which
// may itself be another lease's loss.
func cause(reason error) string {
	switch {
	case errors.Is(reason, lease.ErrParentDone):
		return causeParentDone
	case errors.Is(reason, lease.ErrReleased):
		return causeReleased
	case errors.Is(reason, lease.ErrNotHeld):
		return causeNotHeld
	case errors.Is(reason, lease.ErrExpired):
		return causeExpired
	}
	return causeOther
}

// ObserveEvictions implements lease.Observer.
func (o *Observer) ObserveEvictions(n int64) {
	if n > 0 {
		o.redisEvicted.Add(float64(n))
	}
}

// Describe implements prometheus.Collector.
func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	o.acquireTotal.Describe(ch)
	o.acquireDuration.Describe(ch)
	o.renewTotal.Describe(ch)
	o.renewDuration.Describe(ch)
	o.lostTotal.Describe(ch)
	o.held.Describe(ch)
	o.redisEvicted.Describe(ch)
}

// Collect implements prometheus.Collector.
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	o.acquireTotal.Collect(ch)
	o.acquireDuration.Collect(ch)
	o.renewTotal.Collect(ch)
	o.renewDuration.Collect(ch)
	o.lostTotal.Collect(ch)
	o.held.Collect(ch)
	o.redisEvicted.Collect(ch)
}
