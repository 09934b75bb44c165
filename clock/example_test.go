package clock_test

import (
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/clock"
)

// A fake clock moves only when told: Step moves the wall reading alone (an
// NTP correction), Advance moves elapsed time too and fires the timers that
// came due, late, as a process frozen for that long sees them.
func ExampleFake() {
	c := clock.NewFake(time.Date(2026, 3, 2, 17, 0, 0, 0, time.UTC))
	t := c.NewTimer(time.Second)

	c.Step(-2 * time.Hour) // the wall clock is corrected; no time passed
	fmt.Println(c.Now().Format(time.TimeOnly), "armed:", c.Armed(t))

	c.Advance(8 * time.Second) // frozen for 8 s
	fmt.Println((<-t.C()).Format(time.TimeOnly), "armed:", c.Armed(t))
	// Output:
	// 15:00:00 armed: true
	// 15:00:08 armed: false
}
