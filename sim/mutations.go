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
	// resetUnrecorded: a ledger restart that lost its data keeps
	// answering with the horizon and the latest slot it had before, so
	// no replica finds the reset: the slots in flight are lost without a
	// record and succeeded ones may run again.
	resetUnrecorded
)

// has reports whether m includes bug.
func (m mutation) has(bug mutation) bool { return m&bug != 0 }

// controls names each mutation for the controls= figure, in order.
var controls = []struct {
	name string
	mut  mutation
}{
	{"sink_accepts_stale_token", staleSinkAccept},
	{"time_floor_off", timeFloorOff},
	{"evicted_lease_not_signalled", evictedNotSignalled},
	{"horizon_reset_unrecorded", resetUnrecorded},
}
