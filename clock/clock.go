package clock

import "time"

// Clock reads the wall clock and makes timers that measure elapsed time.
// Implementations are safe for concurrent use.
type Clock interface {
	// Now returns the current wall-clock time.
	Now() time.Time
	// NewTimer returns a timer that fires once d of elapsed time has
	// passed (at once for d <= 0), sending the wall-clock time on C.
	NewTimer(d time.Duration) Timer
	// AfterFunc returns a timer that, once d of elapsed time has passed
	// (at once for d <= 0), calls f on a goroutine of its own, as
	// time.AfterFunc does: nothing waits for the time to pass, and no
	// goroutine exists until it fires. Its C is nil; Stop and Reset have
	// time.AfterFunc's meaning (Stop does not wait for an f already
	// called, and Reset arms it again).
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a one-shot timer of a Clock, as time.Timer: C delivers one value
// when a timer of NewTimer fires (C is nil for a timer of AfterFunc); Stop
// and Reset have time.Timer's meaning (Go 1.23 and later: no stale value
// is received after either returns).
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

// Real returns the system clock: time.Now, time.NewTimer and
// time.AfterFunc. Inside a testing/synctest bubble these are the bubble's
// fake time.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return realTimer{time.AfterFunc(d, f)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// Sleep waits for d on c, or until done is closed; it reports whether d
// passed.
func Sleep(c Clock, d time.Duration, done <-chan struct{}) bool {
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-done:
		return false
	}
}
