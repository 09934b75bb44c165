package clock

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Fake is a Clock that moves only when told, for tests. Its zero value is
// not usable: create it with NewFake.
type Fake struct {
	mu      sync.Mutex
	wall    time.Time
	elapsed time.Duration // monotonic reading since NewFake
	timers  []*fakeTimer  // armed timers
	changed chan struct{} // closed and replaced when timers are armed or stopped
}

// NewFake returns a Fake whose wall clock reads wall (its monotonic
// location stripped).
func NewFake(wall time.Time) *Fake {
	return &Fake{wall: wall.Round(0), changed: make(chan struct{})}
}

// Now returns the fake wall-clock time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.wall
}

// NewTimer returns a timer that fires when Advance has moved elapsed time
// by d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// AfterFunc returns a timer that calls f, on a goroutine of its own, when
// Advance has moved elapsed time by d (at once for d <= 0). Its C is nil.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	t := &fakeTimer{f: f, fn: fn}
	t.Reset(d)
	return t
}

// Advance moves elapsed and wall-clock time forward by d, then fires every
// timer that came due, in deadline order, each with the final wall time (a
// timer of AfterFunc has its f started, on a goroutine of its own, in that
// order; the calls then run in any order):
// a large d is what a process frozen for d (SIGSTOP, VM suspend) sees when
// it resumes, or a wall clock that jumped with the process asleep. A test
// that wants time to pass smoothly advances in steps no longer than the
// code's shortest timer.
func (f *Fake) Advance(d time.Duration) {
	if d < 0 {
		panic("clock: Fake.Advance with a negative duration; use Step")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.elapsed += d
	f.wall = f.wall.Add(d)
	due := slices.DeleteFunc(slices.Clone(f.timers), func(t *fakeTimer) bool { return t.at > f.elapsed })
	slices.SortStableFunc(due, func(a, b *fakeTimer) int { return int(a.at - b.at) })
	for _, t := range due {
		f.remove(t)
		t.fire(f.wall)
	}
	if len(due) > 0 {
		f.notify()
	}
}

// Step moves the wall clock by d (negative: backward) without elapsed time
// passing and without firing a timer: an NTP correction or an operator
// setting the clock.
func (f *Fake) Step(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wall = f.wall.Add(d)
}

// Armed reports whether t, a timer of f, is armed: neither fired nor
// stopped. A test that knows which timer the code under test sleeps on
// tells with it whether that code is still asleep.
func (f *Fake) Armed(t Timer) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	ft, ok := t.(*fakeTimer)
	return ok && slices.Contains(f.timers, ft)
}

// Waiters returns how many timers are armed.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// BlockUntil waits until at least n timers are armed, or ctx ends (its
// error returned).
func (f *Fake) BlockUntil(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		armed, changed := len(f.timers), f.changed
		f.mu.Unlock()
		if armed >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// remove disarms t; f.mu is held.
func (f *Fake) remove(t *fakeTimer) bool {
	i := slices.Index(f.timers, t)
	if i < 0 {
		return false
	}
	f.timers = slices.Delete(f.timers, i, i+1)
	return true
}

// notify wakes BlockUntil; f.mu is held.
func (f *Fake) notify() {
	close(f.changed)
	f.changed = make(chan struct{})
}

type fakeTimer struct {
	f  *Fake
	c  chan time.Time // nil for a timer of AfterFunc
	fn func()         // AfterFunc's f; nil for a timer of NewTimer
	at time.Duration  // elapsed reading at which it fires
}

// fire sends wall on c, or starts fn; f.mu is held.
func (t *fakeTimer) fire(wall time.Time) {
	if t.fn != nil {
		go t.fn()
		return
	}
	select {
	case t.c <- wall:
	default:
	}
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	armed := t.f.remove(t)
	t.drain()
	if armed {
		t.f.notify()
	}
	return armed
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	f := t.f
	f.mu.Lock()
	defer f.mu.Unlock()
	armed := f.remove(t)
	t.drain()
	if d <= 0 {
		t.fire(f.wall)
		f.notify()
		return armed
	}
	t.at = f.elapsed + d
	f.timers = append(f.timers, t)
	f.notify()
	return armed
}

// drain drops a value sent and not received, as time.Timer does since Go
// 1.23.
func (t *fakeTimer) drain() {
	if t.c == nil {
		return
	}
	select {
	case <-t.c:
	default:
	}
}
