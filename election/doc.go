// Package election elects one leader among candidates, on top of the
// fenced leases of package lease.
//
// # Overview
//
// Every candidate creates the same Election (same name, same key prefix,
// same Redis) and calls Campaign, which blocks until it wins the
// election's lease. The winner gets a *Leadership: a term with the lease's
// fencing token, a Context canceled when the term ends, and Resign.
// Anyone can ask who leads with Leader (now) or Observe (wait for one).
//
//	e, err := election.New(client, "billing-leader", election.Options{})
//	...
//	ld, err := e.Campaign(ctx, "replica-7:8080", lease.WithLifetime(appCtx))
//	if err != nil { ... }
//	defer ld.Resign(context.Background())
//	lead(ld.Context(), ld.Holder()) // stop when ld.Context() ends
//
// # State model
//
//	candidate --Campaign wins the lease--> leader (term with token T)
//	leader --Resign----------------------> ended (lease.ErrReleased)
//	leader --lease lost------------------> ended (lease.ErrNotHeld, lease.ErrExpired)
//	leader --lifetime ctx ends-----------> ended (lease.ErrParentDone)
//
// Campaign's ctx bounds the wait only; the lifetime context is the one
// passed with lease.WithLifetime, if any.
//
// An ended term is final; campaigning again gives a new term with a larger
// token. Terms never overlap in Redis, but a leader can pause after its
// last check, like any lease holder: the token, checked where the leader's
// work lands (package fence, sinks/...), is what keeps a deposed leader
// from writing. Leadership.Context ends no later than the lease's trust
// window (see package lease).
//
// # Keys
//
// The election uses the lease called name (<prefix>{name}, with its fence
// counter) and one more key under the same hash tag, so that everything
// works on Redis Cluster: the leader record <prefix>{name}:leader, a hash
// of the leader's owner, token and value. The winner writes it right after
// winning, with a script that writes only while the lease key still holds
// the winner's owner (a fenced write). Leader reads it with a script that
// reports it only while the lease key still holds that owner, so a leader
// whose lease ended is never reported, whatever the record's age. Like the
// fence counter, the record has no TTL: it is overwritten by the next
// leader. Announcements are published on <prefix>{name}:elected, which
// wakes Observe.
//
// The election's lease is an ordinary lease of the client's key space: an
// election and any other lease of the same name under the same prefix are
// one lease. In particular a scheduler on the same Redis with the default
// prefix (scheduler.NewRedis without Namespace, and lease.New's default
// "holdfast:lease:") names its leases after its jobs ("<job>" and
// "<job>|<partition>"): an election "report" and a job "report" take turns
// on one lease, and the job's slots are skipped while the election is led
// (logged at debug level only, as any claim that finds its lease held).
// Give elections a client of their own prefix (lease.Options.Prefix, e.g.
// "myapp:election:"), or the scheduler a Namespace.
//
// # Guarantees and non-guarantees
//
//   - At most one candidate holds the election's lease at a time in one
//     Redis; terms' tokens strictly increase.
//   - Leader reports the holder of the lease at the moment of the read,
//     not later: by the time the answer arrives, that leader may be gone.
//   - After a Sentinel or Cluster failover that lost the latest writes, two
//     candidates can each believe they lead (see package lease); their
//     tokens decide at the sinks.
//   - Redis data loss (see docs/guarantees.md, "Not guaranteed"): after a
//     restart from an older snapshot, Leader may report a leader that has
//     since resigned, and nobody is elected until that restored lease key's
//     TTL ends.
package election
