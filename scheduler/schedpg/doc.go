// Package schedpg runs a scheduler on PostgreSQL alone in one call: New
// builds the lease backend (lease/pglease) and the ledger
// (scheduler/ledger/pgledger) over one pgx pool, creates or updates their
// tables, and returns the scheduler.Scheduler, as scheduler.NewRedis does
// for Redis. It lives apart from package scheduler so that a service on
// Redis does not link pgx. Build the parts yourself and call scheduler.New
// for any other layout (a ledger in Postgres and leases in Redis, other
// schemas per part).
package schedpg
