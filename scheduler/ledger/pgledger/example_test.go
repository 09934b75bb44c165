package pgledger_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/pgledger"
)

// A ledger over a pool, migrated once at start-up, given to the scheduler
// (scheduler.Options.Ledger) in place of the Redis one. The calls below are
// the ones a scheduler makes for one slot.
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db.internal:5432/app")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	ldg, err := pgledger.New(pool, pgledger.Options{Schema: "holdfast"})
	if err != nil {
		log.Fatal(err)
	}
	if err := ldg.Migrate(ctx); err != nil {
		log.Fatal(err)
	}

	slot := ledger.Slot{Job: "daily-settlement", At: time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC)}
	held := ledger.Fence{Scope: ledger.UnitScope(slot.Job, slot.Partition), Token: 1_741_417_200_000_123, Owner: "replica-a/4f1c"} // the job lease's
	attempt, left, err := ldg.Begin(ctx, slot, held, 3, time.Now())
	switch {
	case errors.Is(err, ledger.ErrSlotDone):
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
	err = ldg.Finish(ctx, slot, held, attempt, ledger.Outcome{Status: ledger.StatusSucceeded}, time.Now())
	fmt.Println(err)
}
