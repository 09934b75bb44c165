// Package schedprom exposes a scheduler's measurements as Prometheus
// collectors. Create an Observer, pass it as scheduler.Options.Observer and
// register it with your own registry; nothing is registered globally.
//
// Metrics (namespace configurable, default "holdfast"; label job is a
// registered job name, a bounded set; slots, owners and partitions are never
// labels):
//
//	job_run_started_total{job}
//	job_run_completed_total{job,status}      status: succeeded | failed
//	job_run_duration_seconds{job}            histogram
//	job_claim_conflict_total{job}            claims that found the lease held
//	job_run_stale_total{job}                 ledger writes refused as stale
//	job_schedule_lag_seconds{job}            histogram: start - scheduled instant, of the first
//	                                         attempts of slots that came due on the schedule only
//	                                         (not Trigger, Backfill, Retry, nor retries)
//	job_last_success_timestamp{job}          unix seconds of the last success
//	job_slot_skipped_total{job,status}       status: skipped | missed
//	job_run_failed_total{job,class,final}    failed attempts by ledger.ErrorClass (retryable |
//	                                         permanent | interrupted | timeout | panic |
//	                                         deferred: not counted, never final); final
//	                                         "true" when no attempt follows (retries exhausted)
//	job_ledger_errors_total{job,op}          store errors of claims: op state | begin | heartbeat |
//	                                         finish | skip (ledger) | claim (lease acquisition)
//	job_ledger_reset_total{job}              ledger resets a replica found: the store lost its data
//	                                         (event ledger_reset; Observer.LedgerReset)
//
// job_ledger_errors_total is how a Redis or Postgres outage shows, besides
// the Warn and Error logs: a claim that cannot read or write the ledger
// runs nothing. docs/alerts.yml holds alerting rules on these metrics.
package schedprom

import (
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// ErrInvalidOptions is returned by New for buckets that do not strictly
// increase.
var ErrInvalidOptions = fmt.Errorf("schedprom: %w", errfamily.ErrInvalidOptions)

// Options configure an Observer. The zero value is valid.
type Options struct {
	// Namespace prefixes every metric name. Default "holdfast".
	Namespace string
	// DurationBuckets and LagBuckets are histogram buckets in seconds.
	// Defaults: prometheus.DefBuckets and 1 ms to ~65 s exponential.
	DurationBuckets, LagBuckets []float64
}

// Observer implements scheduler.Observer and prometheus.Collector.
type Observer struct {
	started     *prometheus.CounterVec
	completed   *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	conflicts   *prometheus.CounterVec
	stale       *prometheus.CounterVec
	lag         *prometheus.HistogramVec
	lastSuccess *prometheus.GaugeVec
	skipped     *prometheus.CounterVec
	failed      *prometheus.CounterVec
	ledgerErrs  *prometheus.CounterVec
	resets      *prometheus.CounterVec
}

var _ scheduler.Observer = (*Observer)(nil)

// New returns an Observer; register it with a prometheus.Registerer. It
// returns an error matching ErrInvalidOptions for buckets that do not
// strictly increase.
func New(opts Options) (*Observer, error) {
	ns := opts.Namespace
	if ns == "" {
		ns = "holdfast"
	}
	durations := opts.DurationBuckets
	if durations == nil {
		durations = prometheus.DefBuckets
	}
	lags := opts.LagBuckets
	if lags == nil {
		lags = prometheus.ExponentialBuckets(0.001, 2, 17)
	}
	for _, b := range [][]float64{durations, lags} {
		for i := 1; i < len(b); i++ {
			if !(b[i] > b[i-1]) {
				return nil, fmt.Errorf("%w: buckets %v: want strictly increasing", ErrInvalidOptions, b)
			}
		}
	}
	job := []string{"job"}
	return &Observer{
		started: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "job_run_started_total",
			Help: "Attempts started."}, job),
		completed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "job_run_completed_total",
			Help: "Attempts finished, by status."}, []string{"job", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "job_run_duration_seconds",
			Help: "Duration of finished attempts.", Buckets: durations}, job),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "job_claim_conflict_total",
			Help: "Claims that found the job's lease held by another replica."}, job),
		stale: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "job_run_stale_total",
			Help: "Ledger writes refused because this replica's token was stale."}, job),
		lag: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "job_schedule_lag_seconds",
			Help: "Time from a slot's scheduled instant to the start of its first attempt, for slots that came due on the schedule (catch-up included; runs an operator asked for by trigger, backfill or retry, and retries, are not observed).", Buckets: lags}, job),
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "job_last_success_timestamp",
			Help: "Unix time (s) of the job's last successful attempt on this replica."}, job),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "job_slot_skipped_total",
			Help: "Slots recorded skipped or missed by policy."}, []string{"job", "status"}),
		failed: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "job_run_failed_total",
			Help: "Attempts recorded failed, by error class; final is true when no attempt follows."}, []string{"job", "class", "final"}),
		ledgerErrs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "job_ledger_errors_total",
			Help: "Claims a store failed (Redis or Postgres errors), by operation."}, []string{"job", "op"}),
		resets: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "job_ledger_reset_total",
			Help: "Ledger resets this replica found, per (job, partition): the store lost its data (event ledger_reset)."}, job),
	}, nil
}

func (o *Observer) collectors() []prometheus.Collector {
	return []prometheus.Collector{o.started, o.completed, o.duration, o.conflicts, o.stale, o.lag, o.lastSuccess, o.skipped, o.failed, o.ledgerErrs, o.resets}
}

// Describe implements prometheus.Collector.
func (o *Observer) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range o.collectors() {
		c.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (o *Observer) Collect(ch chan<- prometheus.Metric) {
	for _, c := range o.collectors() {
		c.Collect(ch)
	}
}

// RunStarted implements scheduler.Observer.
// It counts the attempt; the lag goes to job_schedule_lag_seconds
// through ScheduleLag, for scheduled slots only.
func (o *Observer) RunStarted(job string, _ time.Duration) {
	o.started.WithLabelValues(job).Inc()
}

var _ scheduler.ScheduleLagObserver = (*Observer)(nil)

// ScheduleLag implements scheduler.ScheduleLagObserver: it observes lag
// (negative counts as 0) in job_schedule_lag_seconds.
func (o *Observer) ScheduleLag(job string, lag time.Duration) {
	o.lag.WithLabelValues(job).Observe(max(lag, 0).Seconds())
}

// RunCompleted implements scheduler.Observer.
func (o *Observer) RunCompleted(job string, status ledger.Status, took time.Duration, finished time.Time) {
	o.completed.WithLabelValues(job, string(status)).Inc()
	o.duration.WithLabelValues(job).Observe(took.Seconds())
	if status == ledger.StatusSucceeded {
		o.lastSuccess.WithLabelValues(job).Set(float64(finished.UnixMilli()) / 1000)
	}
}

// ClaimConflict implements scheduler.Observer.
func (o *Observer) ClaimConflict(job string) { o.conflicts.WithLabelValues(job).Inc() }

// StaleRejected implements scheduler.Observer.
func (o *Observer) StaleRejected(job string) { o.stale.WithLabelValues(job).Inc() }

// SlotSkipped implements scheduler.Observer.
func (o *Observer) SlotSkipped(job string, status ledger.Status) {
	o.skipped.WithLabelValues(job, string(status)).Inc()
}

// RunFailed implements scheduler.Observer.
func (o *Observer) RunFailed(job string, class ledger.ErrorClass, final bool) {
	o.failed.WithLabelValues(job, string(class), strconv.FormatBool(final)).Inc()
}

// LedgerError implements scheduler.Observer.
func (o *Observer) LedgerError(job, op string) { o.ledgerErrs.WithLabelValues(job, op).Inc() }

// LedgerReset implements scheduler.Observer.
func (o *Observer) LedgerReset(job string) { o.resets.WithLabelValues(job).Inc() }
