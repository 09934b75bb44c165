// Package pgtest gives tests the real PostgreSQL at DATABASE_URL (default
// postgres://root@127.0.0.1:5432/test?sslmode=disable).
package pgtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultURL is used when DATABASE_URL is not set.
const DefaultURL = "postgres://root@127.0.0.1:5432/test?sslmode=disable"

// URL returns DATABASE_URL or DefaultURL.
func URL() string {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Require fails the test when PostgreSQL does not answer at URL(), unless
// HOLDFAST_SKIP_INTEGRATION=1, which skips it.
func Require(t testing.TB) {
	t.Helper()
	if os.Getenv("HOLDFAST_SKIP_INTEGRATION") == "1" {
		t.Skip("HOLDFAST_SKIP_INTEGRATION=1")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, URL())
	if err != nil {
		t.Fatalf("pgtest: no PostgreSQL at %s (run scripts/services.sh, or set HOLDFAST_SKIP_INTEGRATION=1): %v", URL(), err)
	}
	defer conn.Close(context.Background())
	if err := conn.Ping(ctx); err != nil {
		t.Fatalf("pgtest: PostgreSQL at %s: %v", URL(), err)
	}
}
