package scheduler

import (
	"container/heap"
	"time"
)

// Queuing a unit's next fire, a wake-up, a claim's retry: the timer queue
// the dispatcher (dispatch.go) pops.

// schedule queues u's first fire after t, replacing the queued one; s.mu
// is held.
func (s *Scheduler) schedule(u *unit, t time.Time, prev time.Time) {
	if u.queued != nil {
		heap.Remove(&s.queue, u.queued.index)
		u.queued = nil
	}
	f, ok := u.job.window.next(t)
	if !ok {
		return
	}
	u.queued = &entry{at: f.At, u: u, req: claimReq{fire: f, prev: prev}}
	heap.Push(&s.queue, u.queued)
}

// wakeAt asks for a claim of u at t (a retry's time, or now).
func (s *Scheduler) wakeAt(u *unit, t time.Time) { s.wakeFor(u, t, claimReq{}) }

// wakeFor asks for a claim of u with req at t.
func (s *Scheduler) wakeFor(u *unit, t time.Time, req claimReq) {
	s.mu.Lock()
	heap.Push(&s.queue, &entry{at: t, u: u, req: req})
	s.woken = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// retryClaim asks for a claim of u with req again at t, unless a retry
// of u is queued already: claims refused again and again (Redis down,
// every grant slow) keep one retry per unit, not one per refusal. Claimed
// for its own fire, the slot is judged on its lateness (plan.go) like the
// first try, rather than as missed.
func (s *Scheduler) retryClaim(u *unit, req claimReq, t time.Time) {
	s.mu.Lock()
	if u.retryQueued {
		s.mu.Unlock()
		return
	}
	u.retryQueued = true
	heap.Push(&s.queue, &entry{at: t, u: u, req: req, retry: true})
	s.woken = true
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}
