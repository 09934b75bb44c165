package sim

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// newPCG returns the simulator's random source for one seed and stream.
func newPCG(seed, stream uint64) *rand.PCG { return rand.NewPCG(seed, stream) }

// event is one action of the schedule: a fault, its end, or an
// operator's action, at a step. The schedule is a pure function of the
// seed (plan), drawn step by step, so a shorter run replays a prefix of
// a longer one's schedule exactly.
type event struct {
	step int
	kind string // see plan
	r    int    // the replica (or job index for the operator's pause)
	arg  string // the store of a link fault, a lease name, ...
	d    time.Duration
}

func (e event) String() string {
	s := fmt.Sprintf("step %d %s r%d", e.step, e.kind, e.r)
	if e.arg != "" {
		s += " " + e.arg
	}
	if e.d != 0 {
		s += " " + e.d.String()
	}
	return s
}

// leaseNames are the lease names of the simulated units (for evictions).
func leaseNames() []string {
	var out []string
	for _, u := range units() {
		out = append(out, unitLease(u))
	}
	return out
}

// weighted is a kind of event with its weight in a draw.
type weighted struct {
	kind   string
	weight int
}

// pick draws one of kinds, each with the chance of its weight.
func pick(rng *rand.Rand, kinds []weighted) string {
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	w := rng.IntN(total)
	for _, k := range kinds {
		if w < k.weight {
			return k.kind
		}
		w -= k.weight
	}
	return kinds[len(kinds)-1].kind
}

// faultKinds are the faults the schedule draws from, with their weight.
var faultKinds = []weighted{
	{"delay", 3},         // a link (lease, ledger or sink) adds 0.1-2 s to each call
	{"drop_request", 2},  // a link loses every request
	{"drop_reply", 2},    // a link loses every reply (the store acted)
	{"partition", 2},     // the replica cannot reach the lease store; others can
	{"pause", 3},         // the replica freezes (every call and the job's write wait)
	{"pause_holder", 3},  // whichever replica holds a lease freezes for 4-9 s, past its TTL
	{"crash", 2},         // the replica dies (no release) and restarts later
	{"lease_restart", 1}, // the lease store restarts empty
	{"ledger_restart", 1},
	{"evict", 2},      // one lease's keys are evicted
	{"clock_step", 2}, // the replica's wall clock steps ±900 ms (wild: ±20 s)
	{"slow_sink", 2},  // the replica's sink writes take 0.5-4 s
	{"op_trigger", 2}, // the operator triggers a run on a replica
	{"op_pause", 1},   // the operator pauses a job, resumes it later
}

// operatorKinds are the operator's actions on slots, drawn from a stream
// of their own (planOperator), with their weight.
var operatorKinds = []weighted{
	{"op_retry", 2},    // Retry of a past slot of a unit
	{"op_backfill", 1}, // Backfill of 2-6 past slots of a unit
	{"op_prune", 1},    // the ledger pruned of its records older than a minute
}

// planOperator draws the operator's retries, backfills and prunes for
// seed: at each step, with probability 1/(4 rate), one of them. Its own
// random stream, so that it leaves plan's schedule as it was (the
// schedules the former findings were found with).
func planOperator(seed uint64, steps, replicas int, rate int) []event {
	rng := rand.New(newPCG(seed, 3))
	var evs []event
	for step := 0; step < steps; step++ {
		if rng.IntN(4*rate) != 0 {
			continue
		}
		kind := pick(rng, operatorKinds)
		r := rng.IntN(replicas)
		unit := rng.IntN(len(units()))
		back := 3 + rng.IntN(40) // seconds before now of the (latest) slot
		n := 2 + rng.IntN(5)     // slots of a backfill
		switch kind {
		case "op_retry":
			evs = append(evs, event{step: step, kind: kind, r: r, arg: fmt.Sprint(unit), d: time.Duration(back) * time.Second})
		case "op_backfill":
			evs = append(evs, event{step: step, kind: kind, r: r, arg: fmt.Sprintf("%d/%d", unit, n), d: time.Duration(back) * time.Second})
		case "op_prune":
			evs = append(evs, event{step: step, kind: kind})
		}
	}
	return evs
}

// plan draws the schedule of steps steps for seed on replicas replicas:
// at each step, with probability 1/rate, one fault or operator action,
// and the events that end it (heal, resume, restart) some steps later.
func plan(seed uint64, steps, replicas int, rate int, wild bool) []event {
	rng := rand.New(newPCG(seed, 1))
	var evs []event
	busy := make([]int, replicas) // the step until which a replica is in a process fault
	for step := 0; step < steps; step++ {
		if rng.IntN(rate) != 0 {
			continue
		}
		kind := pick(rng, faultKinds)
		r := rng.IntN(replicas)
		dur := 1 + rng.IntN(8) // steps
		store := []string{"lease", "ledger", "sink"}[rng.IntN(3)]
		switch kind {
		case "delay":
			d := time.Duration(100+rng.IntN(1900)) * time.Millisecond
			evs = append(evs, event{step: step, kind: kind, r: r, arg: store, d: d}, event{step: step + dur, kind: "heal", r: r, arg: store})
		case "drop_request", "drop_reply":
			evs = append(evs, event{step: step, kind: kind, r: r, arg: store}, event{step: step + dur, kind: "heal", r: r, arg: store})
		case "partition":
			evs = append(evs, event{step: step, kind: kind, r: r, arg: "lease"}, event{step: step + dur, kind: "heal", r: r, arg: "lease"})
		case "slow_sink":
			d := time.Duration(500+rng.IntN(3500)) * time.Millisecond
			evs = append(evs, event{step: step, kind: kind, r: r, arg: "sink", d: d}, event{step: step + dur, kind: "heal", r: r, arg: "sink"})
		case "pause", "crash":
			if busy[r] > step {
				continue
			}
			end := "resume"
			if kind == "crash" {
				end = "restart"
			}
			busy[r] = step + dur + 1
			evs = append(evs, event{step: step, kind: kind, r: r}, event{step: step + dur, kind: end, r: r})
		case "pause_holder":
			names := leaseNames()
			n := names[rng.IntN(len(names))]
			evs = append(evs, event{step: step, kind: kind, arg: n}, event{step: step + 3 + dur%6, kind: "resume_holder", arg: n, r: step})
		case "lease_restart", "ledger_restart":
			evs = append(evs, event{step: step, kind: kind, r: 0, d: time.Duration(1+rng.IntN(3)) * time.Second})
		case "evict":
			names := leaseNames()
			evs = append(evs, event{step: step, kind: kind, arg: names[rng.IntN(len(names))]})
		case "clock_step":
			d := time.Duration(rng.IntN(41)-20) * time.Second // wild: ±20 s
			if !wild {
				d = d * 45 / 1000 // ±900 ms
			}
			evs = append(evs, event{step: step, kind: kind, r: r, d: d})
		case "op_trigger":
			evs = append(evs, event{step: step, kind: kind, r: r, arg: fmt.Sprint(rng.IntN(len(units())))})
		case "op_pause":
			j := rng.IntN(len(jobs))
			evs = append(evs, event{step: step, kind: kind, r: r, arg: jobs[j].name},
				event{step: step + 3 + dur, kind: "op_resume", r: r, arg: jobs[j].name})
		}
	}
	return evs
}
