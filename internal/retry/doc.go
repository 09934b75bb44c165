// Package retry computes the wait before a retry, once for the tree: the
// scheduler's retry backoff (scheduler), the lease client's wait while a
// lease is held (lease.Client.Acquire) and the HTTP Transport's retries
// (sinks/httpfence) all draw their delays here.
//
// A delay has two parts. Exponential is the un-jittered interval,
// base * 2^(attempt-1) capped at max; it comes from
// github.com/cenkalti/backoff/v5's ExponentialBackOff (Multiplier 2,
// RandomizationFactor 0), built afresh on each call so that the result is
// a pure function of the attempt number: the scheduler stores the next
// attempt's time in its ledger and recomputes the delay after a restart, so
// no state may live between calls. Jitter then spreads a delay uniformly
// over [d*(1-below), d*(1+above)] with a random source the caller passes.
//
// The library's own randomization is not used: ExponentialBackOff draws
// from the global math/rand/v2 source, which cannot be seeded, and the
// scheduler's tests depend on a seedable source (scheduler.Options.Jitter);
// its range is also symmetric (d ± factor*d), while the lease client and
// the Transport draw from [d/2, d]. Delay is the two together.
package retry
