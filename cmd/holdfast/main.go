// Command holdfast is the operator's tool for holdfast: it lists leases
// and their fencing tokens, reads the fences of the Postgres and Redis
// sinks, lists jobs and runs, retries, triggers, backfills, pauses and
// resumes jobs through a running service's admin handler, and prunes the
// ledger. Run "holdfast help" for the commands.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/redis/go-redis/v9"
)

func main() {
	// go-redis logs dial failures to stderr on its own; the command reports
	// the error once, itself. The logger is process-wide, so only main,
	// which owns the process, sets it (not run, which tests call).
	redis.SetLogger(quietLogger{})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// quietLogger discards go-redis's internal log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}
