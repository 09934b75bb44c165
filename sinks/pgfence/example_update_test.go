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

// A fenced write to the caller's own table: the accounts row carries
// fence_token, fence_owner and fence_scope columns, and the balance changes
// only if the token is the freshest the row has seen from its lease.
func ExampleFencedUpdate() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	// In a real job this is the lease's (or the scheduler's Run's) Holder.
	h := fence.Holder{Scope: "billing-close", Token: 1_717_000_000_000_001, Owner: "replica-a:9f3c2e"}
	row := pgfence.Row{Table: pgx.Identifier{"billing", "accounts"}, KeyColumn: "id", Key: 42}

	err = pgfence.FencedUpdate(ctx, pool, row, map[string]any{"balance": 1250}, h)
	var stale *fence.StaleTokenError
	switch {
	case err == nil:
		fmt.Println("updated")
	case errors.As(err, &stale):
		fmt.Printf("stale: presented %d, current %d\n", stale.Presented, stale.Current)
	case errors.Is(err, pgfence.ErrScopeMismatch):
		fmt.Println("account 42 is fenced by another lease:", err)
	case errors.Is(err, pgfence.ErrRowNotFound):
		fmt.Println("no account 42; FencedUpsert creates it")
	case errors.Is(err, pgfence.ErrRetryable):
		fmt.Println("retry:", err)
	default:
		fmt.Println("failed:", err)
	}
}
