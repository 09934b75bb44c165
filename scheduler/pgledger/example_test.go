package pgledger_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/pgledger"
)

// A ledger over a pool, migrated once at start-up, given to the scheduler
// (scheduler.Config.Ledger) in place of the Redis one. The calls below are
// the ones a scheduler makes for one slot.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db.internal:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	ledger, err := pgledger.New(pool, pgledger.Config{Schema: "holdfast"})
	if err != nil {
		log.Fatal(err)
	}
	if err := ledger.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	slot := scheduler.Slot{Job: "daily-settlement", At: time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)}
	held := scheduler.Fence{Token: 1_741_417_200_000_123, Owner: "replica-a/4f1c"} // the job lease's
	attempt, left, err := ledger.Begin(ctx, slot, held, 3, time.Now())
	switch {
	case errors.Is(err, scheduler.ErrSlotDone):
		return // another replica ran it
	case errors.Is(err, fence.ErrStaleToken):
		return // this replica lost the lease
	case err != nil:
		log.Fatal(err)
	}
	// ... the job's work, under slot.Key() as its idempotency key. A
	// retryable failure with left > 0 finishes with StatusFailed and a
	// RetryAt; with left == 0 the failure is final ...
	fmt.Println("attempts left after this one:", left)
	err = ledger.Finish(ctx, slot, held, attempt, scheduler.Outcome{Status: scheduler.StatusSucceeded}, time.Now())
	fmt.Println(err)
}
