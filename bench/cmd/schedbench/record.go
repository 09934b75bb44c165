package main

import (
	"slices"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// recorder counts runs from the job side: each run records its slot (job,
// partition, instant) and its lag; duplicates are the runs beyond one per
// slot.
type recorder struct {
	mu      sync.Mutex
	want    int
	seen    map[string]int
	lags    []time.Duration // the first run's of each slot
	runs    int
	last    time.Time // when the last slot got its first run
	lastRun time.Time
	all     chan struct{}
	allShut bool
}

func newRecorder(want int) *recorder {
	return &recorder{want: want, seen: make(map[string]int, want), all: make(chan struct{})}
}

// add records a run of slot with lag.
func (r *recorder) add(slot string, lag time.Duration) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.runs++
	r.lastRun = now
	r.seen[slot]++
	if r.seen[slot] > 1 {
		return
	}
	r.lags = append(r.lags, lag)
	if len(r.lags) == r.want && !r.allShut {
		r.allShut = true
		r.last = now
		close(r.all)
	}
}

// quiet waits until no run came for d (counted from the call at the
// earliest), at most until limit.
func (r *recorder) quiet(d time.Duration, limit time.Time) {
	from := time.Now()
	for time.Now().Before(limit) {
		r.mu.Lock()
		idle := time.Since(r.lastRun)
		r.mu.Unlock()
		idle = min(idle, time.Since(from))
		if idle >= d {
			return
		}
		time.Sleep(d - idle)
	}
}

// figures returns the distinct slots run, all runs, the duplicates and
// the lag percentiles (ms) of the first runs.
func (r *recorder) figures() (slots, runs, dups int, p50, p99 float64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	lags := slices.Clone(r.lags)
	slices.Sort(lags)
	pct := func(p float64) float64 {
		if len(lags) == 0 {
			return 0
		}
		return float64(lags[int(p*float64(len(lags)-1))].Microseconds()) / 1000
	}
	return len(lags), r.runs, r.runs - len(lags), pct(0.50), pct(0.99)
}

// quietCh is quiet in a goroutine of its own, whose end the channel
// tells: it returns by limit at the latest.
func (r *recorder) quietCh(d time.Duration, limit time.Time) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.quiet(d, limit)
	}()
	return done
}

// completions is the schedulers' Observer: it counts the attempts
// recorded (RunCompleted, called once the ledger took the outcome) and
// closes at[i] when the count reaches the i-th of its wants.
type completions struct {
	scheduler.Observer // the rest of the interface: never called (a nil Observer's methods would panic)
	mu                 sync.Mutex
	n                  int
	wants              []int
	at                 []chan struct{}
}

func newCompletions(wants ...int) *completions {
	c := &completions{wants: wants, Observer: nopObserver{}}
	for range wants {
		c.at = append(c.at, make(chan struct{}))
	}
	return c
}

func (c *completions) RunCompleted(string, ledger.Status, time.Duration, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	for i, w := range c.wants {
		if c.n == w {
			close(c.at[i])
		}
	}
}

func (c *completions) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// nopObserver is an Observer that does nothing.
type nopObserver struct{}

func (nopObserver) RunStarted(string, time.Duration)                             {}
func (nopObserver) RunCompleted(string, ledger.Status, time.Duration, time.Time) {}
func (nopObserver) ClaimConflict(string)                                         {}
func (nopObserver) StaleRejected(string)                                         {}
func (nopObserver) SlotSkipped(string, ledger.Status)                            {}
func (nopObserver) RunFailed(string, ledger.ErrorClass, bool)                    {}
func (nopObserver) LedgerError(string, string)                                   {}
func (nopObserver) LedgerReset(string)                                           {}

// waitAll waits until every one of chs is closed and reports true, or
// false when timeout comes first.
func waitAll(timeout <-chan time.Time, chs ...<-chan struct{}) bool {
	for _, ch := range chs {
		select {
		case <-ch:
		case <-timeout:
			return false
		}
	}
	return true
}
