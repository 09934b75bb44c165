package scheduler

import "github.com/holdfast-go/holdfast/clock"

// Quiet is quiet, for the fake-time tests of package scheduler_test.
func (s *Scheduler) Quiet() bool { return s.quiet() }

// quiet reports whether s has nothing in flight: its dispatcher sleeps on
// a timer that has not fired, with no wake-up pending and nothing due in the
// queue, and no claim is at work: every claim or run in flight waits in
// its job function or on the clock.
func (s *Scheduler) quiet() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	fake, ok := s.clock.(interface{ Armed(clock.Timer) bool })
	switch {
	case !ok:
		panic("scheduler: Quiet needs a fake clock")
	case s.parked.timer == nil, !fake.Armed(s.parked.timer), len(s.wake) > 0, s.active.Load() > s.waiting.Load():
		return false
	case s.queue.Len() > 0 && !s.queue[0].at.After(now):
		return false
	}
	return true
}
