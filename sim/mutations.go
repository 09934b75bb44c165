package sim

// mutation is a set of planted bugs, the simulator's negative controls:
// each one, put in, must be found (a violation) within a bounded number
// of seeds, which shows that the invariant that finds it can fail. Only
// this package's tests set one (Config.mutation is unexported): the
// hooks live in the simulated stores and sinks, never in the real code.
type mutation uint

const (
	// staleSinkAccept: the sink accepts every write, stale tokens too
	// (its fence check is gone).
	staleSinkAccept mutation = 1 << iota
	// timeFloorOff: the lease store issues counter+1 only, without the
	// floor of its clock in µs, so a restart or an eviction that loses
	// the counter issues tokens again from 1.
	timeFloorOff
	// evictedNotSignalled: the lease store answers a renewal of an
	// evicted (or restart-lost) lease as held, so its holder is never
	// told it lost it.
	evictedNotSignalled
	// noIdempotency: the sink forgets the idempotency keys it applied,
	// so a retried or replayed write applies its effect again.
	noIdempotency
	// resetUnrecorded: the ledger store, back empty after a data loss,
	// keeps no trace of it: State answers the horizon it had before and,
	// for a pair with no slot since, the instant of its first read after
	// the loss as the last slot (as a store that seeds "last" on start
	// would), so no replica finds the reset and the slots of the outage
	// are never planned.
	resetUnrecorded
	// fenceKeyShared: the sink keeps a resource's fence in the key space
	// of the resources, at "<resource>:fence", and the job mail writes
	// the resource named "effect:pay|eu:fence" (a name from input): each
	// of its writes overwrites pay|eu's fence, whose next write, stale or
	// not, starts it again.
	fenceKeyShared
)

// has reports whether m includes bug.
func (m mutation) has(bug mutation) bool { return m&bug != 0 }

// controls names each mutation for the controls= figure, in order.
// want is the invariant that must find it.
var controls = []struct {
	name string
	mut  mutation
	want string
}{
	{"sink_accepts_stale_token", staleSinkAccept, "stale_effect"},
	{"time_floor_off", timeFloorOff, "token_not_increasing"},
	{"evicted_lease_not_signalled", evictedNotSignalled, "loss_not_signalled"},
	{"sink_without_idempotency_key", noIdempotency, "effect_twice"},
	{"ledger_reset_unrecorded", resetUnrecorded, "slot_unaccounted"},
	{"resource_name_reaches_a_fence", fenceKeyShared, "stale_effect"},
}
