package sim

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing/synctest"
	"time"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/ledgertest"
)

// Config is one simulated run.
type Config struct {
	// Seed determines the schedule of faults and operator actions, the
	// replicas' clock skews and the retry jitter.
	Seed uint64
	// Steps is the length of the faulty part of the run, in simulated
	// seconds. Default 300.
	Steps int
	// Replicas is the number of scheduler replicas, 3 to 7. Default 3 +
	// Seed % 5.
	Replicas int
	// FaultRate: one event every FaultRate steps on average. Default 4.
	FaultRate int
	// WildClocks skews the replicas' wall clocks by up to ±2 s at start
	// and steps them by up to ±20 s (more than a slot's period: see
	// docs/simulation.md, known findings). Default: skews up to ±400 ms
	// and steps up to ±900 ms, below the simulated jobs' 1 s period.
	WildClocks bool

	mutation mutation // the planted bugs (tests only)
	// noSlotOps leaves out the operator's retries, backfills and prunes
	// (planOperator): the schedules the former findings were found with
	// (tests only).
	noSlotOps bool
	debug     func(string) // told of every ledger write (tests only)
}

// Grace is how long after its instant a slot must have an effect or a
// ledger record with a reason; the checks of the run's last Grace
// seconds happen in its quiet tail.
const Grace = 45 * time.Second

// stepDur is one step of the driver: one simulated second.
const stepDur = time.Second

// Result is what a run found.
type Result struct {
	Seed     uint64
	Steps    int
	Replicas int
	Slots    int // slots checked: each has an effect or a record with a reason
	Faults   int // faults and operator actions injected
	// Effects counts the slots with an effect and Grants the lease
	// names granted; they depend on the goroutines' order, so they are
	// not in the trace.
	Effects, Grants int
	// Refused counts the stale writes the sink refused (not in the trace).
	Refused int
	// Pruned counts the records the operator's prunes deleted (op_prune;
	// not in the trace).
	Pruned     int64
	Violations []Violation
	// Trace is the run's trace: the schedule it carried out and the
	// per-step facts it checked (see docs/simulation.md). TraceHash is
	// its SHA-256.
	Trace     []string
	TraceHash string
}

// Failed reports whether the run broke an invariant.
func (r Result) Failed() bool { return len(r.Violations) > 0 }

func (c Config) withDefaults() Config {
	if c.Steps <= 0 {
		c.Steps = 300
	}
	if c.Replicas == 0 {
		c.Replicas = 3 + int(c.Seed%5)
	}
	if c.FaultRate <= 0 {
		c.FaultRate = 4
	}
	return c
}

// ErrInvalidConfig matches a Config Run refuses.
var ErrInvalidConfig = errors.New("sim: invalid config")

// ErrNotInBubble is Run's error outside a testing/synctest bubble.
var ErrNotInBubble = errors.New("sim: Run must be called inside a testing/synctest bubble (synctest.Test)")

// inBubble reports whether the caller runs in a synctest bubble:
// synctest.Wait panics outside one.
func inBubble() (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	synctest.Wait()
	return true
}

// world is the simulated system of one run.
type world struct {
	seed   uint64
	chk    *checker
	leases *leaseStore
	ledger *ledgerStore
	sink   *sink
	mu     sync.Mutex
	reps   []*replica
	clocks []*skewClock
	// pausedJobs: per job, the unix second an operator pause began, and
	// pauseWindows the closed ones [from, to], for the due check.
	pausedJobs   map[string]int64
	pauseWindows map[string][][2]int64
	resuming     map[string]bool
	heldPaused   map[string]*replica        // pause_holder's replicas, by the pause's step and lease
	pausing      map[string][]chan struct{} // per job: closed when an operator's Pause call returned
	stopped      map[int]chan struct{}      // per replica: closed when its crashed incarnation stopped
	inc          int                        // incarnations started so far
	startErr     error
	closing      bool
	quit         chan struct{}
	wg           sync.WaitGroup
}

// Run runs cfg and returns what it found. It must be called inside a
// testing/synctest bubble (synctest.Test): every clock of the run is the
// bubble's, so a run of minutes takes milliseconds, and a run outside a
// bubble would take its simulated time in real time. It returns an error
// only for a bad Config (ErrInvalidConfig), a call outside a bubble
// (ErrNotInBubble) or a system that could not be built; broken
// invariants are in Result.Violations.
func Run(cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	if !inBubble() {
		return Result{}, ErrNotInBubble
	}
	if cfg.Replicas < 3 || cfg.Replicas > 7 {
		return Result{}, fmt.Errorf("%w: Replicas %d: 3 to 7", ErrInvalidConfig, cfg.Replicas)
	}
	chk := newChecker()
	chk.debug = cfg.debug
	w := &world{seed: cfg.Seed, chk: chk, leases: newLeaseStore(cfg.mutation, chk),
		ledger: newLedgerStore(cfg.mutation, chk), sink: newSink(cfg.mutation, chk),
		pausedJobs: map[string]int64{}, pauseWindows: map[string][][2]int64{},
		resuming: map[string]bool{}, pausing: map[string][]chan struct{}{}, heldPaused: map[string]*replica{}, stopped: map[int]chan struct{}{}, quit: make(chan struct{})}
	res := Result{Seed: cfg.Seed, Steps: cfg.Steps, Replicas: cfg.Replicas}
	trace := func(format string, args ...any) { res.Trace = append(res.Trace, fmt.Sprintf(format, args...)) }
	trace("sim seed=%d steps=%d replicas=%d rate=%d wild=%v mutation=%d", cfg.Seed, cfg.Steps, cfg.Replicas, cfg.FaultRate, cfg.WildClocks, cfg.mutation)

	skews := rand.New(newPCG(cfg.Seed, 2))
	for i := range cfg.Replicas {
		c := &skewClock{}
		d := time.Duration(skews.IntN(801)-400) * time.Millisecond
		if cfg.WildClocks {
			d *= 5
		}
		c.step(d)
		trace("replica %d skew %v", i, d)
		w.clocks = append(w.clocks, c)
		r, err := w.startReplica(i, c)
		if err != nil {
			w.stopAll()
			return res, err
		}
		w.reps = append(w.reps, r)
	}

	evs := plan(cfg.Seed, cfg.Steps, cfg.Replicas, cfg.FaultRate, cfg.WildClocks)
	if !cfg.noSlotOps {
		evs = append(evs, planOperator(cfg.Seed, cfg.Steps, cfg.Replicas, cfg.FaultRate)...)
	}
	slices.SortStableFunc(evs, func(a, b event) int { return a.step - b.step })
	t0 := time.Now()
	start := t0.Unix()
	checked := start + 2 // slots up to here are checked; the first ones may be before the replicas started
	us := units()
	tail := int(Grace/stepDur) + 10
	next := 0
	for step := 0; step < cfg.Steps+tail; step++ {
		time.Sleep(time.Until(t0.Add(time.Duration(step+1) * stepDur)))
		synctest.Wait()
		chk.mu.Lock()
		chk.step = step
		chk.mu.Unlock()
		if step == cfg.Steps {
			w.healAll()
			trace("step %d heal_all", step)
		}
		for ; next < len(evs) && evs[next].step <= step; next++ {
			if step >= cfg.Steps {
				continue // past the faulty part: healed
			}
			e := evs[next]
			w.apply(e)
			res.Faults++
			trace("%s", e)
		}
		now := time.Now()
		chk.checkBeliefs(w.leases, now, leaseTTL, stepDur)
		upTo := now.Add(-Grace).Unix()
		n := 0
		if upTo > checked {
			n = chk.checkDue(us, checked, upTo, w.exempt)
			checked = upTo
		}
		chk.mu.Lock()
		nv := len(chk.violations)
		chk.mu.Unlock()
		trace("step %d checked=%d violations=%d", step, n, nv)
	}
	w.stopAll()
	synctest.Wait()
	if w.startErr != nil {
		return res, w.startErr
	}
	chk.mu.Lock()
	res.Violations = slices.Clone(chk.violations)
	res.Slots = chk.settled
	res.Effects = len(chk.effects)
	res.Grants = len(chk.tokens)
	res.Refused = chk.refused
	res.Pruned = chk.prunedN
	chk.mu.Unlock()
	for _, v := range res.Violations {
		trace("violation %s", v)
	}
	h := sha256.New()
	for _, l := range res.Trace {
		h.Write([]byte(l))
		h.Write([]byte{'\n'})
	}
	res.TraceHash = hex.EncodeToString(h.Sum(nil))
	return res, nil
}

// units lists the simulated (job, partition) units.
func units() []slotID {
	var out []slotID
	for _, j := range jobs {
		ps := j.partitions
		if len(ps) == 0 {
			ps = []string{""}
		}
		for _, p := range ps {
			out = append(out, slotID{job: j.name, partition: p, at: j.every})
		}
	}
	return out
}

// unitLease is the lease name of a unit (slotID.at holds its period).
func unitLease(u slotID) string { return ledger.UnitScope(u.job, u.partition) }

// exempt reports whether the slot of job at at needs no effect nor
// record: it is not a slot of the job's schedule, or the operator had the
// job paused then (or around then).
func (w *world) exempt(job string, at int64) bool {
	for _, j := range jobs {
		if j.name == job && at%j.every != 0 {
			return true
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if from, ok := w.pausedJobs[job]; ok && at >= from-2 {
		return true
	}
	for _, win := range w.pauseWindows[job] {
		if at >= win[0]-2 && at <= win[1]+2 {
			return true
		}
	}
	return false
}

// apply carries out one event of the schedule.
func (w *world) apply(e event) {
	var r *replica
	w.mu.Lock()
	if e.r < len(w.reps) { // resume_holder's r is its pause's step
		r = w.reps[e.r]
	}
	w.mu.Unlock()
	switch e.kind {
	case "delay", "slow_sink", "drop_request", "partition", "drop_reply", "heal", "pause", "resume", "op_trigger", "op_pause", "op_retry", "op_backfill":
		if r == nil {
			return // the replica is down (crashed): nothing to do
		}
	}
	switch e.kind {
	case "delay", "slow_sink":
		r.proc.setLink(e.arg, linkMode{delay: e.d})
	case "drop_request", "partition":
		r.proc.setLink(e.arg, linkMode{dropReq: true})
	case "drop_reply":
		r.proc.setLink(e.arg, linkMode{dropReply: true})
	case "heal":
		r.proc.setLink(e.arg, linkMode{})
	case "pause":
		r.proc.pause()
	case "resume":
		r.proc.resume()
	case "crash":
		w.crash(e.r)
	case "restart":
		w.restart(e.r)
	case "lease_restart":
		w.leases.down(true)
		w.leases.restart()
		w.goOwned(func() {
			select {
			case <-time.After(e.d):
			case <-w.quit:
			}
			w.leases.down(false)
		})
	case "ledger_restart":
		w.ledger.crash()
		w.goOwned(func() {
			select {
			case <-time.After(e.d):
			case <-w.quit:
			}
			w.ledger.up()
		})
	case "evict":
		w.leases.evict(e.arg)
	case "pause_holder":
		if h := w.holderOf(e.arg); h != nil && !h.frozen {
			h.frozen = true
			h.proc.pause()
			w.mu.Lock()
			w.heldPaused[fmt.Sprint(e.step, e.arg)] = h
			w.mu.Unlock()
		}
	case "resume_holder":
		k := fmt.Sprint(e.r, e.arg)
		w.mu.Lock()
		h := w.heldPaused[k]
		delete(w.heldPaused, k)
		w.mu.Unlock()
		if h != nil {
			h.frozen = false
			h.proc.resume()
		}
	case "clock_step":
		w.clocks[e.r].step(e.d)
	case "op_trigger":
		i, _ := strconv.Atoi(e.arg)
		u := units()[i]
		w.goOwned(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, _ = r.sched.Trigger(ctx, u.job, u.partition, "sim")
		})
	case "op_pause":
		w.mu.Lock()
		if _, ok := w.pausedJobs[e.arg]; !ok {
			w.pausedJobs[e.arg] = time.Now().Unix()
		}
		w.mu.Unlock()
		done := make(chan struct{})
		w.mu.Lock()
		w.pausing[e.arg] = append(w.pausing[e.arg], done)
		w.mu.Unlock()
		w.goOwned(func() {
			defer close(done)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_ = r.sched.Pause(ctx, e.arg)
		})
	case "op_resume":
		w.resume(e.arg)
	case "op_retry", "op_backfill":
		w.slotOp(r, e)
	case "op_prune":
		w.goOwned(func() {
			// holdfast ledger prune: straight to the store, records of
			// slots older than a minute, all checked already (Grace).
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			before := time.Now().Add(-pruneMargin)
			_ = w.ledger.do(func(m *ledgertest.Memory) error {
				n, err := m.Prune(ctx, before)
				w.chk.pruned(n)
				return err
			})
		})
	}
}

// slotOp carries out the operator's Retry (op_retry) or Backfill
// (op_backfill) of past slots of a unit on replica r: its latest slot
// e.d before now (aligned to the job's period), and for a backfill the
// slots before it ("<unit>/<count>").
func (w *world) slotOp(r *replica, e event) {
	unit, count, _ := strings.Cut(e.arg, "/")
	i, _ := strconv.Atoi(unit)
	n, _ := strconv.Atoi(count)
	u := units()[i]
	every := u.at
	latest := time.Unix((time.Now().Add(-e.d).Unix()/every)*every, 0)
	w.goOwned(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if e.kind == "op_retry" {
			_ = r.sched.Retry(ctx, u.job, u.partition, latest, "sim")
			return
		}
		from := latest.Add(-time.Duration(int64(n-1)*every) * time.Second)
		_, _ = r.sched.Backfill(ctx, u.job, u.partition, from, latest, "sim")
	})
}

// resume asks the live replicas to resume job, one after the other, a
// round every second, until one succeeds; until then the job counts as
// paused.
func (w *world) resume(job string) {
	w.mu.Lock()
	if w.resuming[job] {
		w.mu.Unlock()
		return
	}
	w.resuming[job] = true
	w.mu.Unlock()
	w.goOwned(func() {
		// A pause still in flight (its replica frozen) lands later: the
		// operator resumes after it.
		w.mu.Lock()
		pausing := w.pausing[job]
		w.pausing[job] = nil
		w.mu.Unlock()
		for _, done := range pausing {
			select {
			case <-done:
			case <-w.quit:
				return
			}
		}
		for {
			w.mu.Lock()
			from, ok := w.pausedJobs[job]
			reps := slices.Clone(w.reps)
			w.mu.Unlock()
			if !ok {
				break
			}
			for _, r := range reps {
				if r == nil {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				err := r.sched.Resume(ctx, job, false)
				cancel()
				if err == nil {
					w.mu.Lock()
					delete(w.pausedJobs, job)
					w.pauseWindows[job] = append(w.pauseWindows[job], [2]int64{from, time.Now().Unix()})
					w.mu.Unlock()
					break
				}
			}
			select {
			case <-w.quit:
				return
			case <-time.After(time.Second):
			}
		}
		w.mu.Lock()
		delete(w.resuming, job)
		w.mu.Unlock()
	})
}

// goOwned runs f on a goroutine the world waits for (stopAll).
func (w *world) goOwned(f func()) {
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		f()
	}()
}

// crash kills replica i: its calls fail from now on, it releases nothing
// (its Stop's releases fail too), and its beliefs end with it.
func (w *world) crash(i int) {
	w.mu.Lock()
	r := w.reps[i]
	w.reps[i] = nil
	w.mu.Unlock()
	if r == nil {
		return
	}
	r.proc.setCrashed(true)
	r.proc.resume()
	w.chk.forget(r.inc)
	stopped := make(chan struct{})
	w.mu.Lock()
	w.stopped[i] = stopped
	w.mu.Unlock()
	w.goOwned(func() {
		defer close(stopped)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = r.sched.Stop(ctx)
	})
}

// restart starts replica i again once its crashed incarnation stopped.
func (w *world) restart(i int) {
	w.mu.Lock()
	stopped := w.stopped[i]
	w.mu.Unlock()
	w.goOwned(func() {
		if stopped != nil {
			<-stopped
		}
		r, err := w.startReplica(i, w.clocks[i])
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil {
			w.startErr = errors.Join(w.startErr, err)
			return
		}
		if w.reps[i] != nil || w.closing { // restarted twice, or the run is ending
			w.goOwned(func() { _ = r.sched.Stop(context.Background()) })
			return
		}
		w.reps[i] = r
	})
}

// healAll ends every fault: links healed, pauses resumed, crashed
// replicas restarted, stores up, jobs resumed.
func (w *world) healAll() {
	w.mu.Lock()
	reps := slices.Clone(w.reps)
	var paused []string
	for j := range w.pausedJobs {
		paused = append(paused, j)
	}
	w.mu.Unlock()
	slices.Sort(paused)
	for i, r := range reps {
		if r == nil {
			w.restart(i)
			continue
		}
		r.proc.healAll()
	}
	w.leases.down(false)
	w.ledger.up()
	for _, j := range paused {
		w.resume(j)
	}
}

// stopAll stops every replica and waits for every goroutine the world
// started.
func (w *world) stopAll() {
	close(w.quit)
	w.mu.Lock()
	w.closing = true
	w.mu.Unlock()
	w.wg.Wait() // restarts and crash stops done: w.reps is final
	w.mu.Lock()
	reps := slices.Clone(w.reps)
	w.mu.Unlock()
	var wg sync.WaitGroup
	for _, r := range reps {
		if r == nil {
			continue
		}
		r.proc.healAll()
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_ = r.sched.Stop(ctx)
		}()
	}
	wg.Wait()
}

// holderOf returns the live replica holding the lease called name, nil
// when none does.
func (w *world) holderOf(name string) *replica {
	w.mu.Lock()
	reps := slices.Clone(w.reps)
	w.mu.Unlock()
	for _, r := range reps {
		if r != nil && w.leases.holds(name, r.lv.owner(name)) {
			return r
		}
	}
	return nil
}
