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
}
