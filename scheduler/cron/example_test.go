package cron_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/scheduler/cron"
)

// A fixed-time job whose wall time does not exist on the spring-forward
// day runs once, at the end of the gap.
func ExampleParse() {
	s, err := cron.Parse("30 2 * * *", cron.Options{Zone: "America/New_York"})
	if err != nil {
		panic(err)
	}
	f, _ := s.Next(time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC))
	fmt.Println(f.At, f.Rule)
	fmt.Println(f.Local.Format(time.DateTime+" MST"), "business date", f.BusinessDate)
	// Output:
	// 2026-03-08 07:00:00 +0000 UTC gap-run-after
	// 2026-03-08 03:00:00 EDT business date 2026-03-08
}

// A wildcard spec follows the wall clock: 01:00 and 01:30 run in both
// passes of the fall-back fold.
func ExampleSchedule_Between() {
	s, _ := cron.Parse("CRON_TZ=America/New_York */30 * * * *", cron.Options{})
	from := time.Date(2026, 11, 1, 4, 0, 0, 0, time.UTC)
	for _, f := range s.Between(from, from.Add(3*time.Hour), 10) {
		fmt.Println(f.At.Format(time.RFC3339), f.Local.Format("15:04 MST"), f.Rule)
	}
	// Output:
	// 2026-11-01T04:30:00Z 00:30 EDT normal
	// 2026-11-01T05:00:00Z 01:00 EDT fold-first
	// 2026-11-01T05:30:00Z 01:30 EDT fold-first
	// 2026-11-01T06:00:00Z 01:00 EST fold-second
	// 2026-11-01T06:30:00Z 01:30 EST fold-second
	// 2026-11-01T07:00:00Z 02:00 EST normal
}

// A fixed-time job in the fall-back fold runs once by default;
// FoldBoth runs it in both passes.
func ExampleOptions() {
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, o := range []cron.FoldPolicy{cron.FoldFirst, cron.FoldBoth} {
		s, _ := cron.Parse("30 1 * * *", cron.Options{Zone: "America/New_York", Fold: o})
		fmt.Print(o, ":")
		for _, f := range s.Between(from, from.Add(12*time.Hour), 10) {
			fmt.Print(" ", f.At.Format("15:04Z"))
		}
		fmt.Println()
	}
	// Output:
	// first: 05:30Z
	// both: 05:30Z 06:30Z
}

// Parse errors match their sentinel with errors.Is.
func ExampleParseError() {
	_, err := cron.Parse("CRON_TZ=Europe/Berlin 0 0 * * *", cron.Options{Zone: "America/New_York"})
	fmt.Println(errors.Is(err, cron.ErrZoneConflict))
	_, err = cron.Parse("0 0 * * *", cron.Options{Zone: "Mars/Olympus_Mons"})
	fmt.Println(errors.Is(err, cron.ErrUnknownZone))
	_, err = cron.Parse("61 * * * *", cron.Options{})
	var pe *cron.ParseError
	fmt.Println(errors.Is(err, cron.ErrInvalidSpec), errors.As(err, &pe) && pe.Err != nil)
	// Output:
	// true
	// true
	// true true
}

// @every is a fixed interval on the real timeline, anchored at the Unix
// epoch, untouched by DST.
func ExampleSchedule_Interval() {
	s, _ := cron.Parse("@every 90s", cron.Options{Zone: "America/New_York"})
	f, _ := s.Next(time.Date(2026, 3, 8, 6, 59, 0, 0, time.UTC))
	fmt.Println(s.Interval(), f.At.Format(time.RFC3339), f.Local.Format("15:04:05 MST"))
	// Output:
	// 1m30s 2026-03-08T07:00:00Z 03:00:00 EDT
}
