// Package chaos is holdfast's fault-proof harness: every safety guarantee of
// docs/guarantees.md is tested here against the fault it is about, produced
// for real, at the scale the project promises, with a negative control.
//
// The package holds no library code: everything is in its tests. Each
// scenario is one test that starts its own processes (test-owned
// redis-server primaries, replicas and Sentinels from internal/redisproc,
// worker processes re-executed from the test binary), uses the machine's
// PostgreSQL (one schema per scenario), and injects its fault by SIGSTOP,
// SIGKILL, a restart without persistence, or the loopback proxy of
// internal/faultproxy (latency, stalls, resets). Every loop is bounded in
// count and in time.
//
// # Scale
//
// CHAOS_SCALE (default 0.05) scales the number of trials of each scenario
// (at least 2) and the length of the scheduler run. `make test` runs the
// default; `make chaos` runs CHAOS_SCALE=1, the figures the project is
// judged by, plus the fuzz targets for 60 s each.
//
// # Output
//
// Each scenario prints one line on stdout,
//
//	chaos: <name> trials=N violations=0 <its own counts> control=fired N/N
//
// and a progress counter on stderr. A scenario fails unless violations is 0
// and every control trial fired. Control trials run the same fault with the
// protection removed (a plain INCR token source, a sink without its fence
// check, ReplicaAck off, the idempotency middleware off): a control that
// shows no violation means the check cannot fail, and fails the scenario.
//
// # Scenarios
//
//   - holder-sigstop (TestHolderSIGSTOPedPastItsTTL): 3 worker processes
//     contend for a lease; the holder is SIGSTOPed past its TTL between its
//     check and its write; two successors write; the thawed holder's late
//     write must be refused by pgfence; every history is linearizable
//     (porcupine, sinks/sinktest.Model).
//   - redis-pause (TestRedisSIGSTOPedDuringAcquireAndRenew): Redis SIGSTOPed
//     for 1.5-3.5 s (longer than the 1 s TTL) while 3 holders acquire,
//     renew and write through pgfence: the holder loses its lease in most
//     trials, and its late writes after a successor's must be refused.
//   - sink-latency (TestLatencyOnTheHoldersPostgresConnection): one holder's
//     write is held 2 x TTL on its Postgres connection while a successor
//     acquires and writes.
//   - redis-restart (TestRedisRestartedWithoutPersistence): tokens after
//     a kill and an empty restart.
//   - sentinel-failover (TestSentinelFailoverWithReplicationLag): a lagging
//     replica promoted after the primary is killed, ReplicaAck off and on.
//   - scheduler-mix (TestSchedulerProcessesUnderMixedFaults): 5 scheduler
//     processes under SIGSTOP, SIGKILL, Redis pause and restart and
//     Postgres latency.
//   - scheduler-mix-redis-ledger
//     (TestSchedulerProcessesUnderMixedFaultsRedisLedger): the same with
//     the Redis ledger (joined claims and finishes, hot runs taken over),
//     Redis paused but not restarted empty.
//   - redis-data-loss (TestRedisDataLossUnderARunningScheduler): 3
//     scheduler replicas while their Redis is killed and comes back empty;
//     no slot may end with neither an effect nor a record.
//   - redis-partition (TestNetworkPartitionBetweenHolderAndRedis): the
//     network between a holder and Redis cut (faultproxy Stall) while a
//     competitor reaches Redis directly: the competitor takes over, the
//     cut-off holder's late write must be refused by pgfence.
//   - http-reset (TestHTTPRetriesThroughResetsAfterCommit): connection resets
//     after commit, retried through httpfence.Transport into
//     httpfence.Middleware.
//   - pg-restart (TestPostgresRestartedWhileTransactionsAreOpen): a private
//     PostgreSQL server crashed (immediate shutdown) and started again
//     while sink and pgledger transactions are open: no slot lost, nothing
//     half-written, no effect twice.
//   - downstream-kill (TestDownstreamKilledMidRequest): a scheduler job's
//     downstream (httpfence.Middleware over a Postgres store, a worker
//     process) SIGKILLed mid-request on every slot's first request and
//     restarted; the key stays locked for its LockTTL; every slot must end
//     with exactly one effect.
//   - redis-evict (TestEvictedHeldLeaseWithAllowEviction): Redis
//     (maxmemory, volatile-ttl) evicts a held lease's key on clients that
//     opted in with redislease.Eviction.AllowEviction; a competitor takes the
//     lease; the evicted holder's late write must be refused by pgfence,
//     and its loss must name the eviction (lease.ErrEvicted).
package chaos
