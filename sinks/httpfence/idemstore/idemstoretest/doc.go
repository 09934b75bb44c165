// Package idemstoretest is the conformance suite of the idempotency store
// seam (idemstore.Store): Exercise runs the contract every Store meets, as
// lease/leasedriver/leasedrivertest does for lease backends and
// scheduler/ledger/ledgertest for ledgers. The fence stores' suite is
// sinktest.Exercise (through sinktest.FenceSink), the contract of every
// fenced sink.
package idemstoretest
