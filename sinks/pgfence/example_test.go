package pgfence_test

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// New validates the table names; the zero Options uses the defaults.
func ExampleNew() {
	if _, err := pgfence.New(pgfence.Options{}); err == nil {
		fmt.Println("default guard table:", pgfence.DefaultSchema+"."+pgfence.DefaultTable)
	}

	_, err := pgfence.New(pgfence.Options{Schema: "billing; DROP TABLE users"})
	fmt.Println(errors.Is(err, pgfence.ErrInvalidOptions))
	// Output:
	// default guard table: holdfast.fence_guard
	// true
}

// Migrate once at start-up; every replica may do it at the same time.
func ExampleGuard_Migrate() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	guard, err := pgfence.New(pgfence.Options{Schema: "billing"})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := guard.Migrate(ctx, pool); err != nil {
		fmt.Println(err)
	}
}

// A fenced business write: the settlement row commits only if the token from
// the lease is still the freshest one seen for the resource.
func ExampleGuard_Check() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	guard, err := pgfence.New(pgfence.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}

	// In a real job this is l.Holder() of the lease (or run.Holder() of
	// the scheduler's Run): the scope is the lease name.
	h := fence.Holder{Scope: "daily-settlement", Token: 1_717_000_000_000_001, Owner: "replica-a:9f3c2e"}
	const resource = "settlement:2026-03-08"

	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := guard.Check(ctx, tx, resource, h); err != nil {
			return err // BeginFunc rolls back
		}
		_, err := tx.Exec(ctx, `INSERT INTO settlements (day, total) VALUES ($1, $2)`, "2026-03-08", 1250)
		return err
	})

	var stale *fence.StaleTokenError
	switch {
	case err == nil:
		fmt.Println("settled")
	case errors.As(err, &stale):
		// A newer holder took over: stop, do not retry with this token.
		fmt.Printf("stale: presented %d, current %d\n", stale.Presented, stale.Current)
	case errors.Is(err, pgfence.ErrRetryable):
		// Serialization failure or deadlock: run the whole transaction again.
		fmt.Println("retry:", err)
	default:
		fmt.Println("failed:", err)
	}
}
