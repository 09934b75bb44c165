package leaseprom_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/internal/miniconf"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leaseprom"
)

// Register the Observer on your registry and hand it to the lease Client.
func Example() {
	mr, _ := miniredis.Run()
	miniconf.Register(mr) // CONFIG GET answers as a default Redis: noeviction
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	obs, _ := leaseprom.New(leaseprom.Options{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(obs)
	client, _ := lease.New(rdb, lease.Options{Observer: obs})

	ctx := context.Background()
	l, _ := client.TryAcquire(ctx, "daily-settlement", 30*time.Second)
	_, _ = client.TryAcquire(ctx, "daily-settlement", 30*time.Second) // held by l
	_ = l.Renew(ctx)
	_ = l.Release(ctx)

	// Print the non-zero series, as a scrape would show them.
	families, _ := reg.Gather()
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := ""
			for _, lp := range m.GetLabel() {
				labels = fmt.Sprintf("{%s=%q}", lp.GetName(), lp.GetValue())
			}
			switch {
			case m.GetCounter().GetValue() > 0:
				fmt.Printf("%s%s %v\n", f.GetName(), labels, m.GetCounter().GetValue())
			case m.GetHistogram().GetSampleCount() > 0:
				fmt.Printf("%s_count %v\n", f.GetName(), m.GetHistogram().GetSampleCount())
			case f.GetType() == dto.MetricType_GAUGE:
				fmt.Printf("%s %v\n", f.GetName(), m.GetGauge().GetValue())
			}
		}
	}
	// Output:
	// holdfast_lease_acquire_duration_seconds_count 2
	// holdfast_lease_acquire_total{outcome="acquired"} 1
	// holdfast_lease_acquire_total{outcome="held"} 1
	// holdfast_lease_held 0
	// holdfast_lease_lost_total{cause="released"} 1
	// holdfast_lease_renew_duration_seconds_count 1
	// holdfast_lease_renew_total{result="ok"} 1
}
