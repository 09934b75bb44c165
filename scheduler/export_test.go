package scheduler

import (
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// Quiet is quiet, for the fake-time tests of package scheduler_test.
func (s *Scheduler) Quiet() (idle bool, busy int64) { return s.quiet() }

// quiet reports whether s's dispatcher is idle: it sleeps on a timer that
// has not fired, with no wake-up pending and nothing due in the queue, and
// no heartbeat's timer has fired unanswered. busy counts the claims,
// OverlapAllow runs and heartbeats in flight that are not asleep on the
// clock: a test that knows how many of its job functions are blocked
// (held) treats s as settled when idle and busy == held.
func (s *Scheduler) quiet() (idle bool, busy int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	fake, ok := s.clock.(interface{ Armed(clock.Timer) bool })
	if !ok {
		panic("scheduler: quiet needs a fake clock")
	}
	busy = s.active.Load() - s.waiting.Load()
	s.beatMu.Lock()
	for t := range s.beats {
		if !fake.Armed(t) {
			// Fired: the heartbeat is at work, or about to count itself.
			s.beatMu.Unlock()
			return false, busy
		}
	}
	s.beatMu.Unlock()
	switch {
	case s.parked.timer == nil, !fake.Armed(s.parked.timer), s.woken:
		// s.woken, not len(s.wake): a dispatcher that took the wake-up
		// from the channel and has not yet cleared s.parked still looks
		// asleep, and a clock advanced then was read before the change.
		return false, busy
	case s.queue.Len() > 0 && !s.queue[0].at.After(now):
		return false, busy
	}
	return true, busy
}

// QuietState describes what quiet looks at, for a test that did not
// settle.
func (s *Scheduler) QuietState() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.Now()
	fake, _ := s.clock.(interface{ Armed(clock.Timer) bool })
	armed := s.parked.timer != nil && fake != nil && fake.Armed(s.parked.timer)
	head := "none"
	if s.queue.Len() > 0 {
		e := s.queue[0]
		head = fmt.Sprintf("%v (retry=%v scheduled=%v unit=%s/%s)", e.at, e.retry, e.scheduled(), e.u.job.Name, e.u.partition)
	}
	return fmt.Sprintf("now=%v parked_at=%v wait=%v armed=%v woken=%v queue=%d head=%s active=%d waiting=%d",
		now, s.parked.at, s.parked.wait, armed, s.woken, s.queue.Len(), head, s.active.Load(), s.waiting.Load())
}

// claimHeldNow is claimHeld for a test outside the dispatcher: a claim that
// ends with a record makes it at once.
func (s *Scheduler) claimHeldNow(h hold, req claimReq, seen time.Time, pre *ledger.BeginResult) {
	if d := s.claimHeld(h, req, seen, pre); d != nil {
		s.endClaim(d)
	}
}

// claimNow is claim for a test outside the dispatcher, in no place of the
// pool: a claim that ends with a record makes it at once.
func (s *Scheduler) claimNow(u *unit, req claimReq) {
	if d := s.claim(u, req, nil); d != nil {
		s.endClaim(d)
	}
}
