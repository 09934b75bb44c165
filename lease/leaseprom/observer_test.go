package leaseprom_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/leaseprom"
	"github.com/holdfast-go/holdfast/lease/leasetest"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

// setup is the per-test bundle: an Observer registered on a registry of
// its own, and a lease Client reporting to it.
type setup struct {
	obs    *leaseprom.Observer
	reg    *prometheus.Registry
	rdb    redis.UniversalClient
	client *lease.Client
}

func newSetup(t *testing.T, b redistest.Backend) *setup {
	t.Helper()
	rdb := b.New(t)
	obs := newObserver(t, leaseprom.Options{})
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(obs))
	c, err := lease.New(rdb, lease.Options{Prefix: redistest.Prefix(t, rdb), Observer: obs})
	require.NoError(t, err)
	return &setup{obs: obs, reg: reg, rdb: rdb, client: c}
}

// eachBackend runs fn against real Redis and miniredis.
func eachBackend(t *testing.T, fn func(t *testing.T, s *setup)) {
	t.Helper()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, newSetup(t, b))
		})
	}
}

// expect compares the counter family with want, by label value (values
// not listed must be 0).
func (s *setup) expect(t *testing.T, family, label string, want map[string]int) {
	t.Helper()
	values := map[string][]string{
		"holdfast_lease_acquire_total": {"acquired", "error", "held", "slow"},
		"holdfast_lease_renew_total":   {"error", "not_held", "ok"},
		"holdfast_lease_lost_total":    {"expired", "not_held", "other", "parent_done", "released"},
	}[family]
	var text strings.Builder
	fmt.Fprintf(&text, "# HELP %s %s\n# TYPE %s counter\n", family, help(t, s.reg, family), family)
	for _, v := range values {
		fmt.Fprintf(&text, "%s{%s=%q} %d\n", family, label, v, want[v])
	}
	require.NoError(t, testutil.CollectAndCompare(s.obs, strings.NewReader(text.String()), family))
}

// help returns the HELP text of a family, so that expect compares values.
func help(t *testing.T, reg *prometheus.Registry, family string) string {
	t.Helper()
	return find(t, reg, family).GetHelp()
}

func find(t *testing.T, reg *prometheus.Registry, family string) *dto.MetricFamily {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == family {
			return f
		}
	}
	t.Fatalf("no metric family %s", family)
	return nil
}

// held returns the lease_held gauge.
func (s *setup) held(t *testing.T) float64 {
	t.Helper()
	return find(t, s.reg, "holdfast_lease_held").GetMetric()[0].GetGauge().GetValue()
}

// observations returns how many samples a histogram holds.
func (s *setup) observations(t *testing.T, family string) uint64 {
	t.Helper()
	return find(t, s.reg, family).GetMetric()[0].GetHistogram().GetSampleCount()
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestMetricsFollowTheLeaseLifecycle(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		c := s.client

		a, err := c.TryAcquire(ctx, "a", time.Minute)
		require.NoError(t, err)
		require.Equal(t, 1.0, s.held(t))
		_, err = c.TryAcquire(ctx, "a", time.Minute)
		require.ErrorIs(t, err, lease.ErrNotAcquired)
		_, err = c.TryAcquire(canceled(), "b", time.Minute)
		require.ErrorIs(t, err, context.Canceled)
		s.expect(t, "holdfast_lease_acquire_total", "outcome", map[string]int{"acquired": 1, "held": 1, "error": 1})
		require.Equal(t, uint64(3), s.observations(t, "holdfast_lease_acquire_duration_seconds"))

		require.NoError(t, a.Renew(ctx))
		require.ErrorIs(t, a.Renew(canceled()), context.Canceled)
		require.NoError(t, a.Err(), "a failed renew call does not lose the lease")
		require.NoError(t, a.Release(ctx))
		require.Equal(t, 0.0, s.held(t))

		b, err := c.TryAcquire(ctx, "b", time.Minute)
		require.NoError(t, err)
		require.NoError(t, leasetest.ForceExpire(ctx, s.rdb, c, "b"))
		require.ErrorIs(t, b.Renew(ctx), lease.ErrNotHeld)
		s.expect(t, "holdfast_lease_renew_total", "result", map[string]int{"ok": 1, "error": 1, "not_held": 1})
		require.Equal(t, uint64(3), s.observations(t, "holdfast_lease_renew_duration_seconds"))

		app, cancel := context.WithCancel(ctx)
		p, err := c.TryAcquire(ctx, "p", time.Minute, lease.WithLifetime(app))
		require.NoError(t, err)
		require.Equal(t, 1.0, s.held(t))
		cancel()
		testwait.Done(t, p.Done(), 5*time.Second, "loss after the lifetime context's cancel")
		// The lease reports a loss right after canceling its context;
		// ObserveLoss counts the cause before it lowers the gauge.
		testwait.Until(t, 5*time.Second, "loss observed", func() bool { return s.held(t) == 0 })

		// A holder frozen past its trust window is lost at thaw.
		d, err := c.TryAcquire(ctx, "d", time.Second)
		require.NoError(t, err)
		leasetest.Freeze(d)
		deadline := time.NewTimer(time.Until(d.Deadline()))
		<-deadline.C
		leasetest.Thaw(d)
		testwait.Done(t, d.Done(), 5*time.Second, "loss of the thawed holder")
		testwait.Until(t, 5*time.Second, "loss observed", func() bool { return s.held(t) == 0 })

		s.expect(t, "holdfast_lease_lost_total", "cause", map[string]int{"released": 1, "not_held": 1, "parent_done": 1, "expired": 1})
		s.expect(t, "holdfast_lease_acquire_total", "outcome", map[string]int{"acquired": 4, "held": 1, "error": 1})
		require.Equal(t, 0.0, s.held(t), "every acquired lease ended")
		for _, l := range []*lease.Lease{b, p, d} {
			_ = l.Release(ctx)
		}
	})
}

func TestLossCausesAreClassifiedWithErrorsIs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		reason error
		cause  string
	}{
		{lease.ErrReleased, "released"},
		{fmt.Errorf("lease %q: renew: %w", "x", lease.ErrNotHeld), "not_held"},
		{lease.ErrExpired, "expired"},
		{errors.Join(lease.ErrParentDone, context.Canceled), "parent_done"},
		// A parent that was itself a lease's context: its cause is that
		// lease's loss, but this lease ended because its parent did.
		{errors.Join(lease.ErrParentDone, &lease.LostError{Name: "outer", Reason: lease.ErrReleased}), "parent_done"},
		{errors.New("something new"), "other"},
		{nil, "other"},
	} {
		obs := newObserver(t, leaseprom.Options{})
		obs.ObserveAcquire("x", nil, time.Millisecond)
		obs.ObserveLoss("x", tc.reason)
		want := `
# HELP holdfast_lease_held Leases held right now by the observed clients.
# TYPE holdfast_lease_held gauge
holdfast_lease_held 0
`
		require.NoError(t, testutil.CollectAndCompare(obs, strings.NewReader(want), "holdfast_lease_held"))
		reg := prometheus.NewPedanticRegistry()
		require.NoError(t, reg.Register(obs))
		for _, m := range find(t, reg, "holdfast_lease_lost_total").GetMetric() {
			want := 0.0
			if m.GetLabel()[0].GetValue() == tc.cause {
				want = 1
			}
			require.Equal(t, want, m.GetCounter().GetValue(), "reason %v: cause %s", tc.reason, m.GetLabel()[0].GetValue())
		}
	}
}

// An attempt's error picks its outcome label, from a bounded set: an
// error of a kind the observer does not know counts as "error".
func TestAcquireOutcomeFollowsTheError(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err     error
		outcome string
	}{
		{nil, "acquired"},
		{&lease.NotAcquiredError{Name: "x", RemainingTTL: time.Second}, "held"},
		{fmt.Errorf("lease %q: acquire: %w", "x", &leasedriver.SlowAcquireError{Name: "x", Took: time.Second, TTL: time.Second}), "slow"},
		{errors.New("surprise"), "error"},
	} {
		obs := newObserver(t, leaseprom.Options{})
		obs.ObserveAcquire("x", tc.err, time.Millisecond)
		want := `
# HELP holdfast_lease_acquire_total Lease acquire attempts (one Redis round trip each), by outcome: acquired, held (by another owner), error or slow (granted after its trust window ended, refused).
# TYPE holdfast_lease_acquire_total counter
`
		for _, o := range []string{"acquired", "error", "held", "slow"} {
			n := 0
			if o == tc.outcome {
				n = 1
			}
			want += fmt.Sprintf("holdfast_lease_acquire_total{outcome=%q} %d\n", o, n)
		}
		require.NoError(t, testutil.CollectAndCompare(obs, strings.NewReader(want), "holdfast_lease_acquire_total"), "%v", tc.err)
	}
}

func TestNamespaceAndBuckets(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	billing := newObserver(t, leaseprom.Options{Namespace: "billing", Buckets: []float64{0.001, 0.01}})
	require.NoError(t, reg.Register(billing))
	require.NoError(t, reg.Register(newObserver(t, leaseprom.Options{})), "another namespace: no conflict")
	var dup prometheus.AlreadyRegisteredError
	require.ErrorAs(t, reg.Register(newObserver(t, leaseprom.Options{Namespace: "billing"})), &dup)

	billing.ObserveRenew("x", nil, 5*time.Millisecond)
	h := find(t, reg, "billing_lease_renew_duration_seconds").GetMetric()[0].GetHistogram()
	require.Len(t, h.GetBucket(), 2)
	require.Equal(t, uint64(0), h.GetBucket()[0].GetCumulativeCount())
	require.Equal(t, uint64(1), h.GetBucket()[1].GetCumulativeCount())
	require.Equal(t, 4+3+5+1+2+1, testutil.CollectAndCount(billing), "every label value of the counters, the eviction counter, 2 histograms, 1 gauge")
}

func TestNewRegistersNothingGlobally(t *testing.T) {
	t.Parallel()
	newObserver(t, leaseprom.Options{Namespace: "global_check"})
	families, err := prometheus.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, f := range families {
		require.False(t, strings.HasPrefix(f.GetName(), "global_check_"), f.GetName())
	}
}

// newObserver is leaseprom.New that fails the test on an error.
func newObserver(t *testing.T, opts leaseprom.Options) *leaseprom.Observer {
	t.Helper()
	o, err := leaseprom.New(opts)
	require.NoError(t, err)
	return o
}

func TestNewRefusesBucketsThatDoNotIncrease(t *testing.T) {
	t.Parallel()
	_, err := leaseprom.New(leaseprom.Options{Buckets: []float64{0.1, 0.1}})
	require.ErrorIs(t, err, leaseprom.ErrInvalidOptions)
	require.ErrorIs(t, err, errfamily.ErrInvalidOptions) // the family's member (internal/errfamily)
}

// On a Redis allowed to evict (redislease.Eviction.AllowEviction), the keys it
// evicts while a lease is held are counted: here the held lease's own key
// (volatile-ttl evicts only keys with a TTL, and the lease key is the
// only one).
func TestRedisEvictionsAreCounted(t *testing.T) {
	t.Parallel()
	srv := redisproc.Start(t, "--maxmemory", "4mb", "--maxmemory-policy", "volatile-ttl")
	rdb := srv.Client(t)
	obs := newObserver(t, leaseprom.Options{})
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(obs))
	c, err := lease.New(rdb, lease.Options{Observer: obs, Eviction: redislease.Eviction{AllowEviction: true}})
	require.NoError(t, err)
	l, err := c.TryAcquire(t.Context(), "settle", 3*time.Second)
	require.NoError(t, err)
	srv.Fill(t, func() bool { return srv.EvictedKeys(t) > 0 })
	srv.Unfill(t)
	testwait.Done(t, l.Done(), 5*time.Second, "the evicted lease is lost at its next renewal")
	require.ErrorIs(t, l.Err(), lease.ErrEvicted)
	evicted := find(t, reg, "holdfast_lease_redis_evicted_keys_total").GetMetric()[0].GetCounter().GetValue()
	require.Equal(t, float64(srv.EvictedKeys(t)), evicted)
}
