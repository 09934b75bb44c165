package pgstore_test

import (
	"context"
	"log"
	"net/http"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/pgstore"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// The middleware on PostgreSQL: idempotency records in holdfast.
// idempotency_keys, fences in holdfast.fence_guard (the table the handler
// can fence its own writes on, through Fence.Guard).
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://root@127.0.0.1:5432/test")
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	store, err := pgstore.NewStore(pool, pgstore.Options{}) // pgstore.DefaultSchema
	if err != nil {
		log.Fatal(err)
	}
	guard, err := pgstore.NewFence(pool, pgfence.Options{})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range []func(context.Context) error{store.Migrate, guard.Migrate} {
		if err := m(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// The key the lease holders sign their fencing headers with (their
	// Transport's Signer): from a secret store, never from source.
	verifier, err := httpfence.NewVerifier(httpfence.Key{ID: os.Getenv("FENCING_KEY_ID"), Secret: []byte(os.Getenv("FENCING_KEY"))})
	if err != nil {
		log.Fatal(err)
	}
	mw, err := httpfence.Middleware(httpfence.Options{Store: store, Fence: guard, Verifier: verifier})
	if err != nil {
		log.Fatal(err)
	}
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", mw(http.NotFoundHandler())))
}
