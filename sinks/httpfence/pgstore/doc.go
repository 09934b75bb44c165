// Package pgstore holds httpfence's stores in PostgreSQL: Store, the
// idempotency records (idemstore.Store) in <schema>.idempotency_keys, and
// Fence, the admission fence (idemstore.FenceStore) on a pgfence.Guard.
// They live apart from httpfence so that the middleware does not import
// pgx.
//
// Store.Migrate applies the package's embedded, idempotent migration
// (Migrations returns it as files for a migration tool, for a role without
// DDL rights: docs/operations.md);
// Fence.Migrate the guard's (pgfence.Guard.Migrate). Fence's Accept is the
// guard's statement, the one SQL form of the acceptance rule holdfast
// uses, so the handler can fence its own writes on the same guard table
// (Fence.Guard).
//
// A Store and a Fence on the same pool are joined (Store.JoinsFence,
// idemstore.FencedStore): the middleware then claims a new key and checks
// its fence in one statement (Store.BeginFenced), so a request with a new
// key costs two statements (that one and Complete) where Begin and Accept
// apart cost three. For a holder the guard is at already (the common
// case) that statement is an INSERT whose source is the guard's row; a
// replay, which it finds, takes one statement more, the one that answers
// it and raises the fence (one in all for another holder).
package pgstore
