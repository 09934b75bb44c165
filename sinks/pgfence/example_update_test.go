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
// fence_token and fence_owner columns, and the balance changes only if the
// token is the freshest the row has seen.
func ExampleFencedUpdate() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	// In a real job these come from the lease (or the scheduler's Run).
	token, owner := fence.Token(1_717_000_000_000_001), "replica-a:9f3c2e"
	row := pgfence.Row{Table: pgx.Identifier{"billing", "accounts"}, KeyColumn: "id", Key: 42}

	err = pgfence.FencedUpdate(ctx, pool, row, map[string]any{"balance": 1250}, fence.Holder{Token: token, Owner: owner})
	var stale *fence.StaleTokenError
	switch {
	case err == nil:
		fmt.Println("updated")
	case errors.As(err, &stale):
		fmt.Printf("stale: presented %d, current %d\n", stale.Presented, stale.Current)
	case errors.Is(err, pgfence.ErrRowNotFound):
		fmt.Println("no account 42; FencedUpsert creates it")
	case errors.Is(err, pgfence.ErrRetryable):
		fmt.Println("retry:", err)
	default:
		fmt.Println("failed:", err)
	}
}
