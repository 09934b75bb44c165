// Package pgstore holds httpfence's stores in PostgreSQL: Store, the
// idempotency records (httpfence.Store) in <schema>.idempotency_keys, and
// Fence, the admission fence (httpfence.FenceStore) on a pgfence.Guard.
// They live apart from httpfence so that the middleware does not import
// pgx.
//
// Store.Migrate applies the package's embedded, idempotent migration;
// Fence.Migrate the guard's (pgfence.Guard.Migrate). Fence's Accept is the
// guard's statement, the one SQL form of the acceptance rule holdfast
// uses, so the handler can fence its own writes on the same guard table
// (Fence.Guard).
package pgstore
