package main

import (
	"context"
	"log/slog"

	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/pglease"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/pgledger"
)

// backendPostgres is -backend postgres: the leases (lease/pglease), the
// ledger (scheduler/ledger/pgledger) and the sink (sinks/pgfence) in one schema
// of one PostgreSQL, and no Redis. This file is the one place the demo
// names the Postgres ledger package.
const backendPostgres = "postgres"

// pgScheduling returns the lease client, its backend (for the console's
// leases view) and the ledger of a replica (or, for the ledger, of the
// coordinator) on the sink's pool and schema.
func pgScheduling(p *pgStore, logger *slog.Logger) (*lease.Client, leasedriver.Inspector, ledger.Ledger, error) {
	b, err := pglease.New(p.pool, pglease.Options{Schema: p.schema})
	if err != nil {
		return nil, nil, nil, err
	}
	leases, err := lease.NewWithBackend(b, lease.Options{Logger: logger})
	if err != nil {
		return nil, nil, nil, err
	}
	ldg, err := pgledger.New(p.pool, pgledger.Options{Schema: p.schema})
	if err != nil {
		return nil, nil, nil, err
	}
	return leases, b, ldg, nil
}

// migrateScheduling creates the lease and ledger tables in the sink's
// schema (the coordinator does it once, before the replicas start).
func migrateScheduling(ctx context.Context, p *pgStore) error {
	b, err := pglease.New(p.pool, pglease.Options{Schema: p.schema})
	if err != nil {
		return err
	}
	if err := b.Migrate(ctx); err != nil {
		return err
	}
	ldg, err := pgledger.New(p.pool, pgledger.Options{Schema: p.schema})
	if err != nil {
		return err
	}
	return ldg.Migrate(ctx)
}
