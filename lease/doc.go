// Package lease gives TTL leases on Redis with automatic renewal and a
// fencing token issued in the same round trip as the acquire.
//
// # Overview
//
// A Client works over any redis.UniversalClient (single server, Sentinel,
// Cluster). TryAcquire makes one attempt; Acquire waits while another owner
// holds the lease. A successful acquisition returns a *Lease that carries a
// random owner (128 bits from crypto/rand) and a fence.Token strictly larger
// than every token issued before for that name. Present them to every sink
// as Holder() (package fence, sinks/...), whose Scope is the lease name: a
// token is only comparable with tokens of the same lease, so sinks keep
// their fence per (resource, scope). The lease gives liveness, the sinks
// give safety.
//
//	l, err := client.Acquire(ctx, "daily-settlement", 30*time.Second, lease.WithLifetime(appCtx))
//	if err != nil { ... }
//	defer l.Release(context.Background())
//	doWork(l.Context(), l.Holder()) // stop when l.Context() ends
//
// # Backends
//
// The Client knows no store: it talks to a leasedriver.Backend (Acquire,
// batched Renew, Release, optional Notifier, WaitingAcquirer, BatchAcquirer
// and BatchReleaser: the SPI lives in lease/leasedriver, so this package
// holds the user API). New(rdb, opts) is the shortcut for NewWithBackend
// on redislease.NewBackend: the Redis backend of lease/redislease owns the
// key prefix, the key layout (redislease.Backend.Keys, for a package that
// keeps keys beside the lease's, as election does), the Lua scripts, the
// pub/sub hand-off to waiters and the replica acknowledgements (WAIT).
// lease/quorum (Redlock over several masters) and lease/pglease
// (PostgreSQL) are other backends; every backend passes
// lease/leasedriver/leasedrivertest.Exercise. This package imports go-redis for that
// shortcut, and no database driver.
//
// # Keys and scripts
//
// A lease called name lives in the key <prefix>{name} (value: owner) with its
// token counter in <prefix>{name}:fence, and, while a blocked Acquire waits
// for it, a flag <prefix>{name}:waiting that makes the holder's release
// publish on <prefix>{name}:released, and the holder label
// (Options.Holder) of the last labelled acquisition, with its token, in
// <prefix>{name}:holder, which views show (while the token is the
// counter's) in place of the owner (a write capability: Info carries only
// fence.OwnerID of it); the hash tag keeps them in one
// Cluster slot, so CROSSSLOT cannot happen. Acquire, renew and release are
// one Lua script each (lease/redislease/scripts/*.lua), run with EVALSHA and an EVAL fallback
// on NOSCRIPT. Renew and release act only while the key holds our owner and
// never re-create an expired key; only acquire issues tokens.
//
// Operators read leases through leasedriver.Inspector, which
// redislease.Backend implements: Inspect reads one name's keys with a
// read-only script (redislease/scripts/inspect.lua),
// List SCANs every master for lease and fence keys. Neither changes a lease.
//
// # State model
//
//	acquired --renew ok--> acquired
//	acquired --Release--------------------------------> lost (ErrReleased)
//	acquired --renew says "not owner"-----------------> lost (ErrNotHeld)
//	acquired --trust window ends without a renew------> lost (ErrExpired)
//	acquired --lifetime context ends------------------> lost (ErrParentDone)
//
// The context of Acquire, TryAcquire and TryAcquireAll bounds the call
// (the wait) and lends its values to Lease.Context, never its
// cancellation, as in bsm/redislock, redsync and etcd's Mutex.Lock: a
// lease taken under a 300 ms deadline outlives it. The lifetime context
// is the one passed with WithLifetime (a service's own context, so that
// shutdown ends its leases); without it a lease lives until Release or
// loss.
//
// Lost is final: a new acquisition gives a new owner and a larger token.
//
// # Trust window
//
// The holder may act until Deadline: the start of the last successful
// acquire or renew call, plus TTL, minus leasedriver.Drift(TTL) (1% of the
// TTL plus 2 ms), measured on the monotonic clock. Starting from the call's
// start, not its answer, means a slow reply never stretches the window past
// the moment Redis may expire the key. A grant answered at or after TTL -
// Drift(TTL) from the call's start has no window left: the acquire returns
// a *leasedriver.SlowAcquireError (errors.Is(err, ErrSlowAcquire)) on every
// backend, hands out no token, and deletes the key if it still holds this
// acquisition's owner. An
// acquire that fails with a Redis error (a timeout, a lost reply, ctx
// ended while the command was on the wire) deletes it the same way, so a
// failed acquire does not leave its key to block others for the TTL. The
// keep-alive renews every TTL/3 and retries a failed renew at a quarter of
// that. A TTL is at least leasedriver.MinTTL (10 ms): ErrInvalidTTL.
//
// # Loss signal
//
// Lease.Context is canceled when the lease is lost, with a *LostError as its
// cause (context.Cause; errors.Is(cause, ErrLost)) that unwraps to the
// reason too (errors.Is(cause, ErrExpired), ...). The Client's keep-alive timer ends the lease at Deadline whatever
// a renewal in flight is doing, so loss is signalled no later than the end
// of the trust window even while Redis hangs. Release cancels the context
// before it deletes the key. When the lifetime context (WithLifetime)
// ends, the lease is lost with ErrParentDone and its key released.
//
// A timer runs only when the process gets the CPU: a starved or paused
// process can see Context still open past Deadline, after a successor may
// have acquired (the chaos scenario redis-pause measures it). Lease.Err
// therefore reads the trust window itself and ends the lease once it has
// passed: check Err (or Deadline) right before an effect that has no
// fencing sink. Sinks that check the token are the safety net either way.
//
// # An evicting Redis
//
// A Redis with maxmemory set and a maxmemory-policy other than noeviction
// may evict a held lease's key; a competitor can then take the lease before
// the holder's next renewal tells it, which breaks the loss signal above.
// The Redis backend therefore reads the policy (CONFIG GET, before its
// first acquisition, and again a minute after each read that passed, so a
// CONFIG SET or a failover to an evicting policy is seen within about a
// minute: the acquisitions of that minute were not checked, and a key
// evicted then can pass to a competitor before its holder's loss signal;
// every master of a Cluster) and refuses such a Redis with
// redislease.ErrEvictionPolicy, and one that refuses CONFIG GET (managed
// Redis) with redislease.ErrEvictionPolicyUnknown, unless Options.Eviction
// declares the policy (Eviction.Policy) or opts in (Eviction.AllowEviction). Opted
// in, the Client reads Redis's eviction counter on its renewal passes (at
// most once a second), logs redis_evictions, tells its
// Observer.ObserveEvictions,
// and a lease found not held meanwhile is lost with ErrNotHeld joined with
// ErrEvicted. Under noeviction, an acquisition a full Redis refuses fails
// with redislease.ErrRedisMemoryFull.
//
// # Goroutines
//
// A Client keeps its leases alive from one timer, armed for the earliest
// renewal due or trust window ending; each pass runs on the goroutine the
// timer starts and ends with the pass. Acquire and Release start no
// goroutine and no timer of their own. Release of a Client's last lease
// waits for a pass in flight; the timer, left armed so that the next
// Acquire need not re-arm it, fires at most once more, with nothing to do,
// and stops. A renew blocked on a
// hung server returns within the go-redis client's ReadTimeout, or at the
// trust window's end when the client honours context deadlines
// (redis.Options.ContextTimeoutEnabled).
//
// # Guarantees and non-guarantees
//
//   - Tokens for one name strictly increase across acquisitions, also after
//     the counter is lost (restart without persistence, FLUSHALL, eviction):
//     each token is max(last token + 1, Redis TIME in microseconds). This
//     assumes the Redis host clock is not stepped back across the loss.
//   - At most one owner holds the key at any time in one Redis. After a
//     failover to a replica that missed the acquire, two owners can each
//     believe they hold the lease; their tokens then decide at the sink.
//   - No lease gives mutual exclusion of effects on its own: a holder can
//     pause after its last check. Effects are safe only where a sink checks
//     the token (fence.Accept).
package lease
