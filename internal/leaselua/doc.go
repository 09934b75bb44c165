// Package leaselua holds the lease's Redis transitions as Lua functions:
// the one implementation of acquire (SET NX PX and the fencing token) and
// release (compare-and-delete, wake the waiters), shared by the lease
// package's scripts and by scripts of other packages that take or give
// back a lease in the same round trip as their own writes (the
// scheduler's Redis ledger: claim a slot, finish it). Keys and their
// layout are those of redislease.Backend.Keys.
package leaselua
