// Package leaseprom turns the measurements of a lease.Client into
// Prometheus metrics.
//
// An *Observer is both a lease.Observer (pass it as lease.Options.Observer)
// and a prometheus.Collector (register it on the registry of your choice).
// New touches no global state: nothing is registered on
// prometheus.DefaultRegisterer unless you do it.
//
//	obs, _ := leaseprom.New(leaseprom.Options{})
//	reg.MustRegister(obs)
//	client, err := lease.New(rdb, lease.Options{Observer: obs})
//
// One Observer may serve several Clients; their measurements add up.
//
// # Metrics
//
// With the default namespace "holdfast":
//
//	holdfast_lease_acquire_total{outcome}      counter   acquire attempts (one round trip each):
//	                                                     acquired | held | error | slow
//	holdfast_lease_acquire_duration_seconds    histogram duration of one acquire attempt
//	holdfast_lease_renew_total{result}         counter   renewals of one lease: ok | not_held | error
//	holdfast_lease_renew_duration_seconds      histogram duration of a renew call (for batched
//	                                                     renewals, the batch's round trip, once per lease)
//	holdfast_lease_lost_total{cause}           counter   leases ended: released | not_held | expired |
//	                                                     parent_done | other
//	holdfast_lease_held                        gauge     leases held right now by the observed Clients
//
// Every label value is exported once with 0 as soon as the Observer is
// registered, so rate() and absent() work from the first scrape. Lease
// names never appear in labels: they are unbounded (one per job, partition
// or tenant) and belong in logs (lease.Options.Logger). To tell several
// Clients or services apart, register the Observer through
// prometheus.WrapRegistererWith with constant labels, or give each its own
// Namespace.
//
// # What the numbers mean
//
// lost_total{cause="released"} is the normal end of a lease; not_held means
// Redis said another owner holds the key (it expired during a pause, was
// evicted or deleted, or a failover lost it); expired means the trust window
// ended without a successful renewal (Redis unreachable, slow or hung);
// parent_done means the lifetime context (lease.WithLifetime) ended.
// An acquire attempt's outcome label follows the error the Client passes
// to lease.Observer.ObserveAcquire: acquired (nil), held (matches
// lease.ErrNotAcquired), slow (matches lease.ErrSlowAcquire) or error (any
// other error, so the set stays bounded). outcome="slow" counts grants that
// arrived after their trust window had ended: refused and undone; a rise means Redis or
// this process is too slow for the TTLs in use. A rise in not_held
// or expired is a rise in work cut short, and in writes that the fencing
// sinks must reject.
package leaseprom
