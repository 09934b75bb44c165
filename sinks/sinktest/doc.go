// Package sinktest is the conformance suite every fenced sink of holdfast
// meets, and the tools it is built from, for users who write a sink of
// their own.
//
// # The contract
//
// A sink keeps, per (resource, scope), the highest token it accepted and the
// owner that presented it. A write with token t and owner o is accepted iff
// t > stored, or t == stored and o == stored owner (fence.Accept), and is
// refused with a *fence.StaleTokenError otherwise; token 0 is refused with
// an error matching fence.ErrNoToken. The check and the write are atomic.
// A sink is adapted to the suite through the Sink interface (Write), with
// two optional ones: Reader, for a sink that stores values, and
// ScopedWriter, for one that keeps a fence per (resource, scope). An
// admission fence that stores no value (httpfence's FenceStores) is
// adapted by FenceSink.
//
// # Exercise
//
// Exercise(t, newSink) runs the contract as parallel subtests of t, one per
// check. newSink is called once per check, with the check's t, and returns
// the sink to check (fresh, or sharing storage: each check writes
// resources of its own); a check that needs an optional interface the sink
// lacks is skipped with a message naming it. This is the shape of every
// conformance suite of holdfast (leasedrivertest.Exercise, ledgertest.Exercise).
//
// The checks: the rule case by case (first write, larger token, equal
// token and owner, equal token and another owner, smaller token, token 0,
// a sequence of holders up to tokens near 2^62, tokens compared as numbers
// not strings), independent resources (also names differing in case, a
// trailing slash, braces, non-ASCII), independent scopes (ScopedWriter),
// fence state out of reach (no resource name or scope written as a
// naive key layout would name another resource's fence state, K+":fence"
// or "3:job:"+K, touches K's fence),
// two holders forced onto one token (exactly one wins), racing writers
// ending at the largest token, and a concurrency check: 64 goroutines
// write random tokens to 8 resources and, on a Reader, read them back;
// every operation's invocation time, return time and outcome is recorded,
// and the history of each resource is checked for linearizability with
// porcupine (github.com/anishathalye/porcupine) against Model, the
// sequential specification of a fenced register: state (token, owner,
// value), a write is accepted iff the rule passes, a refusal reports the
// current token, a read returns the state.
//
// On a sink that is no Reader, what is stored is checked by a probing
// write: one at the expected token by an owner nobody else uses must be
// refused reporting that token as Current (changing nothing); for a
// resource never written, one at token 1 must be accepted.
//
// Checking linearizability is NP-hard, and a slow sink (serialization
// failures retried under load) produces long operations that overlap by
// the dozen. History.Check therefore first shrinks every interval by what
// the model implies (the token never decreases, so an operation that wrote
// or saw a smaller token comes first) and orders equal call times by token;
// the verdict is unchanged, the search stays in milliseconds.
//
// Linearizability is the right bar for a fenced sink: it says every
// operation took effect at one instant between its call and its return, in
// an order consistent with the rule. A sink whose check and write are not
// atomic produces histories with no such order.
//
// # The negative control
//
// A checker that never fails proves nothing. NegativeControl runs the same
// workload against a sink with the guard removed (NewUnguardedMemory checks
// the rule against a read, yields, and then writes unconditionally, so a
// smaller token can overwrite a larger one accepted meanwhile) and requires
// the checker to report a history that is not linearizable. Run it beside
// Exercise for every backend whose guard can be removed, so a checker
// broken into accepting everything is noticed.
//
// # Writing an adapter
//
// Write must map the sink's answers onto the contract: nil when accepted, an
// error wrapping *fence.StaleTokenError (Resource naming the resource, so
// that it contains the resource string; Presented; Current the stored token)
// when refused, an error matching fence.ErrNoToken for token 0, and any other
// error for a failure (the suite fails on those). Read must return the value
// and the token of the accepted write that stored it, read atomically, and
// ("", fence.None, nil) for a resource never written (Reader). Retry inside the
// adapter if the backend asks for it (a serialization failure): a retried
// operation is still one operation with one call and one return time.
package sinktest
