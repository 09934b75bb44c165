package schedpg

import (
	"context"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-go/holdfast/internal/errfamily"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/pglease"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger/pgledger"
)

// New returns a scheduler.Scheduler on PostgreSQL alone: its leases from
// pglease and its ledger from pgledger, both over pool, with their tables
// created or brought up to date first (pglease's and pgledger's Migrate,
// bounded by ctx; idempotent, safe from several replicas at once). It
// fills only the parts left nil.
//
// opts.Namespace, when set, is the schema of both parts' tables (a
// lower-case SQL identifier); default their DefaultSchema ("holdfast").
// opts.Holder is given to the lease backend too (default: the host name,
// as scheduler.New), and opts.Logger to the lease client (lease_lost and
// the lease package's other events); for the lease client's metrics
// (leaseprom) build it yourself and pass it as Leases.
//
// Migrate creates tables, so New needs a role with DDL rights on the
// schema. An application role without them (the tables applied by a DBA
// from pglease.Migrations and pgledger.Migrations, see docs/operations.md)
// builds the parts itself: pglease.New, lease.NewWithBackend,
// pgledger.New, then scheduler.New with Leases and Ledger set; New then
// migrates neither.
//
// Errors: scheduler.ErrInvalidOptions for a nil pool or what scheduler.New refuses;
// scheduler.ErrInvalidArgument for a nil ctx; the parts'
// ErrInvalidOptions for a Namespace that is not a schema name; Migrate's
// errors (the database's, joined with ctx's).
func New(ctx context.Context, pool *pgxpool.Pool, opts scheduler.Options) (*scheduler.Scheduler, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: schedpg.New: nil pool", scheduler.ErrInvalidOptions)
	}
	if ctx == nil {
		return nil, fmt.Errorf("%w: schedpg.New: %w", scheduler.ErrInvalidArgument, errfamily.ErrNilContext)
	}
	holder := opts.Holder
	if holder == "" && opts.Leases == nil {
		holder = hostLabel()
	}
	if opts.Leases == nil {
		b, err := pglease.New(pool, pglease.Options{Schema: opts.Namespace, Holder: holder})
		if err != nil {
			return nil, fmt.Errorf("schedpg: %w", err)
		}
		if err := b.Migrate(ctx); err != nil {
			return nil, fmt.Errorf("schedpg: %w", err)
		}
		leases, err := lease.NewWithBackend(b, lease.Options{Logger: opts.Logger}) // lease_lost with the scheduler's events
		if err != nil {
			return nil, fmt.Errorf("schedpg: %w", err)
		}
		opts.Leases = leases
	}
	if opts.Ledger == nil {
		ldg, err := pgledger.New(pool, pgledger.Options{Schema: opts.Namespace})
		if err != nil {
			return nil, fmt.Errorf("schedpg: %w", err)
		}
		if err := ldg.Migrate(ctx); err != nil {
			return nil, fmt.Errorf("schedpg: %w", err)
		}
		opts.Ledger = ldg
	}
	opts.Holder = holder
	return scheduler.New(opts)
}

// hostLabel is scheduler.Options.Holder's default without a lease
// client: the host name when it is a valid holder label, else none.
func hostLabel() string {
	host, err := os.Hostname()
	if err != nil || leasedriver.CheckHolder(host) != nil {
		return ""
	}
	return host
}
