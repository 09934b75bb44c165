// Package idemstore is the seam between httpfence's middleware and where it
// keeps idempotency records and fences: the Store, FenceStore and
// FencedStore interfaces, what Store.Begin finds (State, Outcome), the
// stored Response, and the errors every implementation shares
// (ErrLockLost, ErrInvalidFencing, ErrNilContext).
//
// Users of the middleware pick an implementation and pass it in
// httpfence.Options: redisstore.NewStore, pgstore.NewStore, or
// httpfencetest.NewMemoryStore in tests. Writers of a store implement the
// interfaces here and run idemstoretest.Exercise, the conformance suite
// every store of holdfast passes, against their store (as river's
// riverdriver and riverdrivertest, or holdfast's lease/leasedriver and
// leasedrivertest).
//
// The package imports neither the middleware nor any backend, so a store
// depends only on it.
package idemstore
