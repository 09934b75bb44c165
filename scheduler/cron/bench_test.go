package cron_test

import (
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/scheduler/cron"
)

// BenchmarkNext measures one Next call from a point that moves through
// 2026, so DST transitions and month ends are crossed.
func BenchmarkNext(b *testing.B) {
	cases := []struct {
		name, spec, zone string
	}{
		{"FixedDaily/NewYork", "30 2 * * *", ny},
		{"Wildcard30m/NewYork", "*/30 * * * *", ny},
		{"Weekdays/Berlin", "0 9-17 * * MON-FRI", berlin},
		{"Seconds/LordHowe", "*/10 15 2 * * *", lhi},
		{"LeapDay/UTC", "0 0 29 2 *", utcZone},
		{"Every90s/Havana", "@every 90s", havana},
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, bc := range cases {
		b.Run(bc.name, func(b *testing.B) {
			s, err := cron.Parse(bc.spec, cron.Options{Zone: bc.zone})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				// Step 1h37m per call: 5400 steps cover about a year.
				after := start.Add(time.Duration(i%5400) * 97 * time.Minute)
				i++
				s.Next(after)
			}
		})
	}
}
