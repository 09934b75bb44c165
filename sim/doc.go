// Package sim is holdfast's deterministic simulation: the real lease
// client (lease.Client), the real scheduler engine (scheduler.Scheduler),
// the reference ledger (ledgertest.Memory) and the reference fenced sink
// (sinktest.Memory) run as 3 to 7 replicas on the simulated time of one
// testing/synctest bubble, with faults and operator actions drawn from one
// seed, and the system's invariants checked at every simulated second.
//
// Only the stores, the network between a replica and each store, and time
// are simulated: a lease store that keeps leasetest.MemoryBackend's
// contract and passes leasedrivertest.Exercise, with restarts that lose
// every key and evictions; the ledger store, which can restart without its
// data; and per replica a link to each store (lease, ledger, sink) that can
// delay calls, lose requests or replies, or be cut (a partition between the
// holder and the lease store while the others reach it). A replica can be
// paused (its calls and its job's write wait: a frozen process), crashed
// (its calls fail, it releases nothing) and restarted, and its wall clock
// skewed and stepped both ways. An operator triggers runs and pauses and
// resumes jobs.
//
// Checked at every step: no stale effect accepted by the sink; no slot's
// effect twice (a slot that succeeded in the ledger never begins again:
// succeeded -> running is an illegal transition); every due slot has an effect or a ledger record with a reason
// within Grace; lease tokens per scope strictly increase; every ledger
// transition is legal; a holder is told of a lost lease within its trust
// window; and, by synctest.Test and goleak, no goroutine outlives the run.
//
// Run must be called inside a synctest bubble. The tests of this package
// run seeds (make test: a few; make sim: for SIM_TIME, default 5 minutes),
// replay one (SIM_SEED=<n> go test ./sim/...), and check the negative
// controls: planted bugs, behind an unexported Config field, that the
// invariants must find. docs/simulation.md says what is and is not
// simulated, what replays exactly, and how a failing seed becomes a
// regression test.
package sim
