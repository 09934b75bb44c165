package scheduler

import (
	"cmp"
	"slices"
	"sync"
)

// place is a claim's place in the pool (Options.MaxConcurrentClaims,
// Scheduler.sem), owned by the goroutine that runs the claim (unitFrom).
// A run that ends its claim gives the place back before its outcome is
// recorded (run, last), so that the batch claims of due slots need not
// wait for a recording; unitFrom takes one again before it claims once
// more. A record handed to the claimGate takes p along: the goroutine of
// finishLater that goes on with the unit owns it then.
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
// once. Each waits as a record (later), its unit's lease kept alive.
const maxDeferredFinishes = 4096

// maxFinishers bounds the goroutines of one Scheduler that make the
// records of runs whose wait is over (claimGate), each one record after
// the other, so that each grows a stack once, not once per record. Off
// Cluster their finishes go out joined (up to about that many per
// script, as many as a batch claim takes); on Cluster, where each finish
// is a script of its own, each finisher sends its records one after the
// other. The Observer's and Logger's calls of a record run in its
// finisher: a slow one holds up the records queued behind it. schedbench's
// lag and finish times came out alike at 16, 64 and 256 (2026-12-06).
const maxFinishers = 256

// claimGate lets the recording of a run that ends its claim (a finish and
// release: where finishes are joined, one script per batch of runs) wait
// for the batch claims of the Scheduler under way when the record was
// handed over (hold, as the run ended; claimBatches, from its start until
// every unit it was given was tried). A slot's lag is the time until its run starts. When many slots come due
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
//
// A record waits as data, not in a goroutine: the run's goroutine hands
// it over (hold) and ends, and once the batches it waits for ended, up to
// maxFinishers goroutines (started with start) make the records that are
// ready (finish), one after the other. Holding every run's goroutine
// until the batch claims ended (a thousand runs of one second's slots)
// made the runtime grow each one's stack into fresh memory: a third of
// the schedulers' CPU in schedbench's 1,000-slot case, spent while the
// claims of later slots waited for it.
type claimGate struct {
	start     func(func()) // starts a goroutine its owner waits for (Scheduler.wg.Go)
	finish    func(*later) // makes a record (Scheduler.finishLater)
	mu        sync.Mutex
	next      uint64   // the id of the next batch
	active    []uint64 // the batches under way, by id (ascending)
	wait      []*later // records waiting, in the order they came (so by after)
	ready     []*later // records whose wait is over, for the finishers
	finishers int      // finishers running
	making    int      // records being made
	over      bool     // the runs' lifetime ended: nothing waits
}

// newClaimGate returns a gate whose records are made by finish, in
// goroutines started by start.
func newClaimGate(start func(func()), finish func(*later)) *claimGate {
	return &claimGate{start: start, finish: finish}
}

// enter counts a batch claim under way until the returned func is called.
func (g *claimGate) enter() (leave func()) {
	g.mu.Lock()
	id := g.next
	g.next++
	g.active = append(g.active, id)
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.active = slices.DeleteFunc(g.active, func(a uint64) bool { return a == id })
		g.releaseLocked()
	}
}

// hold hands r to the gate to be made once every batch claim under way
// now ended, and reports true; false when there is none, when
// maxDeferredFinishes records wait already, or once the runs' lifetime
// ended: the caller then makes r at once.
func (g *claimGate) hold(r *later) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.active) == 0 || g.over || len(g.wait)+len(g.ready)+g.making >= maxDeferredFinishes {
		return false
	}
	r.after = g.next - 1 // the last batch begun, so wait is in after's order
	g.wait = append(g.wait, r)
	return true
}

// end lets every record go at once: the runs' lifetime ended.
func (g *claimGate) end() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.over = true
	g.releaseLocked()
}

// releaseLocked moves the records whose batches all ended to ready and
// starts finishers for them, up to maxFinishers. A record waits while a
// batch whose id is at most its after (the last begun before it came) is
// under way: the records that may go are those whose after is below the
// lowest id under way, a prefix of wait. g.mu is held: a record waits
// only while a batch is under way, so a goroutine its owner waits for
// is running (the batch's) when a finisher starts.
func (g *claimGate) releaseLocked() {
	n := len(g.wait)
	if !g.over && len(g.active) > 0 {
		lowest := slices.Min(g.active)
		n, _ = slices.BinarySearchFunc(g.wait, lowest, func(r *later, id uint64) int { return cmp.Compare(r.after, id) })
	}
	if n == 0 {
		return
	}
	g.ready = append(g.ready, g.wait[:n]...)
	g.wait = slices.Delete(g.wait, 0, n)
	for g.finishers < min(len(g.ready), maxFinishers) {
		g.finishers++
		g.start(g.finishAll)
	}
}

// finishAll makes ready records until there is none.
func (g *claimGate) finishAll() {
	for {
		g.mu.Lock()
		if len(g.ready) == 0 {
			g.finishers--
			g.mu.Unlock()
			return
		}
		r := g.ready[0]
		g.ready[0] = nil
		g.ready = g.ready[1:]
		g.making++
		g.mu.Unlock()
		g.finish(r)
		g.mu.Lock()
		g.making--
		g.mu.Unlock()
	}
}

// waiters returns how many records wait or are being made.
func (g *claimGate) waiters() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.wait) + len(g.ready) + g.making
}
