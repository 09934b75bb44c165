// Package quorum is a leasedriver.Backend over N independent Redis masters (the
// Redlock model): a lease survives the loss of a minority of them, and
// carries a fencing token that increases across holders as long as a
// majority answers.
//
// # Overview
//
// The lock is go-redsync/redsync's (v4, goredis/v9 pools, one try per
// acquire); the token, the keep-alive, the loss signal and the trust
// window come from holdfast. Build a lease.Client on a Backend and use it
// as with one Redis:
//
//	backend, err := quorum.New([]redis.UniversalClient{m1, m2, m3, m4, m5}, quorum.Options{})
//	client, err := lease.NewWithBackend(backend, lease.Options{})
//	l, err := client.Acquire(ctx, "daily-settlement", 30*time.Second)
//	...
//	guard.Check(ctx, tx, "settlement:2026-03-08", l.Holder())
//
// The masters must be independent (not replicas of one another, not
// nodes of one Cluster): an odd number, at least 3; 3 or 5 is usual. A
// majority is Nodes()/2 + 1. Each master's client bounds how long that
// master can hold up a call: set DialTimeout, ReadTimeout, WriteTimeout and
// PoolTimeout well below your TTLs (100-200 ms on one site), and
// DialerRetries and MaxRetries low, or a dead master costs seconds per
// call.
//
// # Acquire: the lock, then the token
//
// On every master, one script (scripts/acquire.lua, standing in for
// redsync's SET NX PX) takes the key <prefix>{name} and, when it did,
// issues this master's token candidate max(INCR(<prefix>{name}:fence),
// TIME in µs rounded up to 10 ms, proposal) into the counter. redsync counts the grants and
// returns as soon as a majority decided. Then:
//
//  1. the token t is the largest candidate of the masters that granted
//     (a majority);
//  2. a majority of counters must be at t before t is used: the master
//     that issued t is, and the other masters that granted are raised in
//     parallel (scripts/raise.lua: SET counter max(counter, t));
//  3. the validity check: when the whole acquisition, both token phases
//     included, took longer than TTL - leasedriver.Drift(TTL), the keys are
//     released and Acquire fails with *leasedriver.SlowAcquireError.
//
// Any later majority shares a master with the raised majority, whose next
// candidate is above t: tokens strictly increase. docs/quorum.md gives the
// argument, its assumptions and its limits.
//
// The proposal is this process's clock in µs plus Options.TokenLead. When
// it is above the counters and clocks of the majority, all of them answer
// it: their counters are at t already and step 2 sends nothing, so an
// acquisition is one round trip, as redsync's. Otherwise step 2 costs one
// more. Without proposals (Options.TokenLead -1) the 10 ms rounding of the
// TIME floor does much the same: masters whose scripts run within one step
// of each other answer the same floor, and counters that agree the same
// INCR, so step 2 sends something only when a step boundary falls between
// them.
//
// A failed try is one round trip. It waits up to StragglerWait for the
// masters that have not answered, and releases what it took (redsync's
// clean-up is done here) before Acquire returns. Unless the try saw
// another owner hold a majority, Acquire tries again after a random pause
// whose bound doubles each time (5, 10, 20, 40, 80 ms), up to
// Options.SplitRetries times: racers that split the masters so that no
// owner has a majority spread out until one wins, and a try judged
// without some masters' answers (slower than StragglerWait) learns
// whether a majority holder hides behind them.
//
// # Renew and release
//
// Renew is redsync's Extend, Release its Unlock (whose compare-and-delete
// also publishes on <prefix>{name}:released, so a waiting Acquire wakes at
// once; Backend is a leasedriver.Notifier). Both answer when a majority has: a
// master that hangs does not delay them. The redsync Mutex of each
// acquisition is kept for them and dropped on Release.
//
// # Errors
//
// This is the one place that tells retryable from terminal:
//
//   - lease.ErrNotHeld (terminal: the lease is lost): a majority of the
//     masters say the key is gone or someone else's.
//   - *NoQuorumError (ErrNoQuorum, retryable): no majority answered either
//     way, e.g. with more than a minority of the masters down. The
//     keep-alive retries a renew until the trust window ends, and the
//     lease is then lost with lease.ErrExpired.
//   - *leasedriver.SlowAcquireError (ErrSlowAcquire, retryable): the acquisition was
//     too slow to use.
//   - a held lease is not an error of the Backend: lease.Client returns
//     *lease.NotAcquiredError with the time until a majority of the
//     holder's keys expire.
//
// # Guarantees and non-guarantees
//
//   - Tokens strictly increase while the masters' clocks and the holder's
//     run at rates within leasedriver.Drift of each other, and no master loses
//     its counter without its clock being past every token issued before
//     (TIME floor).
//   - At most one owner holds a majority at a time under the same
//     assumptions, and as long as no master restarts empty while holding a
//     key: Redlock's known weakness. A master that restarts without
//     persistence can let a second owner take a majority. Run masters
//     with appendfsync always, or keep them down for a TTL after a crash.
//   - No lock gives mutual exclusion of effects on its own: a holder can
//     pause after its last check. Effects are safe only where a sink checks
//     the token (sinks/pgfence, fence.Check).
package quorum
