package scheduler

import (
	"slices"
	"sync"
)

// place is a claim's place in the pool (Options.MaxConcurrentClaims,
// Scheduler.sem), owned by the goroutine that runs the claim (unitLoop).
// A run that ends its claim gives the place back before its outcome is
// recorded (run, last), so that the batch claims of due slots need not
// wait for a recording; unitLoop takes one again before it claims once
// more.
type place struct {
	s    *Scheduler
	held bool
}

// giveBack gives p back to the pool, once. A nil p holds no place.
func (p *place) giveBack() {
	if p != nil && p.held {
		p.held = false
		<-p.s.sem
	}
}

// take takes a place in the pool for p unless it holds one: it waits for
// one, and reports false when claiming stops first.
func (p *place) take() bool {
	if p.held {
		return true
	}
	select {
	case p.s.sem <- struct{}{}:
		p.held = true
		return true
	case <-p.s.life.claim.Done():
		return false
	}
}

// maxDeferredFinishes bounds the runs of one Scheduler whose outcome waits
// for its batch claims (claimGate): past it, an outcome is recorded at
// once. Each waits in its claim's goroutine, its unit's lease kept alive.
const maxDeferredFinishes = 4096

// claimGate lets the recording of a run that ends its claim (a finish and
// release: where finishes are joined, one script per batch of runs) wait
// for the batch claims of the Scheduler under way when the run ended
// (claimBatches, from its start until every unit it was given was tried).
// A slot's lag is the time until its run starts. When many slots come due
// together, the server runs the claims and the finishes in the order they
// arrive, and every finish sent among the claims makes the claims queued
// behind it later by its cost. Recorded after them, the outcomes cost the
// server what they cost before, no later than the claims' end plus their
// own time. Meanwhile the run's unit stays busy and its lease held (kept
// alive), so no claim of the unit comes between the run and its record.
// The wait needs no clock: it is for the batches under way when it began,
// each of which ends once its units were tried (a batch that waits for a
// place in the pool gets the one the run gave back, or the next); a batch
// begun later does not hold it up.
type claimGate struct {
	mu      sync.Mutex
	active  []chan struct{} // one per batch under way, closed at its end
	waiting int             // outcomes waiting
}

// enter counts a batch claim under way until the returned func is called.
func (g *claimGate) enter() (leave func()) {
	end := make(chan struct{})
	g.mu.Lock()
	g.active = append(g.active, end)
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		g.active = slices.DeleteFunc(g.active, func(c chan struct{}) bool { return c == end })
		g.mu.Unlock()
		close(end)
	}
}

// wait returns once every batch claim under way at the call ended, or
// done is closed; at once when maxDeferredFinishes outcomes already wait.
func (g *claimGate) wait(done <-chan struct{}) {
	g.mu.Lock()
	if len(g.active) == 0 || g.waiting >= maxDeferredFinishes {
		g.mu.Unlock()
		return
	}
	ends := slices.Clone(g.active)
	g.waiting++
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.waiting--
		g.mu.Unlock()
	}()
	for _, end := range ends {
		select {
		case <-end:
		case <-done:
			return
		}
	}
}

// waiters returns how many outcomes wait.
func (g *claimGate) waiters() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waiting
}
