package main

import (
	"context"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/pgledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// pruneJSON is the -o json output of prune.
type pruneJSON struct {
	Ledger  string    `json:"ledger"` // redis or pg
	Before  time.Time `json:"before"`
	DryRun  bool      `json:"dry_run"`
	Deleted int64     `json:"deleted"`
}

func pruneCommand() command {
	c := command{
		name: "ledger prune", args: "--before DURATION|RFC3339 [--dry-run] --redis URL|--pg URL",
		summary: "delete the ledger's done slot records older than a cutoff",
		help: `Deletes the records (and attempts) of done slots (succeeded, failed with no
attempt left, skipped, missed) before the cutoff, from the Redis ledger
(--redis, redisledger) or the Postgres ledger (--pg, pgledger), through
ledger.Pruner. Running, pending and retryable slots, fences, pause flags,
horizons and each (job, partition)'s latest slot are kept. --before is a
duration back from now (720h) or an RFC 3339 time. --dry-run prints the
cutoff and changes nothing (the ledgers cannot count without deleting); it
fails, as prune does, when the ledger cannot prune.

Examples:
  holdfast ledger prune --redis redis://127.0.0.1:6379/0 --before 720h
  holdfast ledger prune --pg postgres://root@127.0.0.1/test --schema holdfast --before 2026-11-01T00:00:00Z
  holdfast ledger prune --redis "$REDIS_URL" --before 2160h --dry-run -o json`,
	}
	c.run = func(ctx context.Context, a *app, args []string) error {
		var before, prefix, schema string
		var dryRun bool
		fs := a.flagSet(c)
		fs.StringVar(&before, "before", "", "the cutoff: a `duration` back from now (720h) or an RFC 3339 time, required")
		fs.BoolVar(&dryRun, "dry-run", false, "print the cutoff, delete nothing")
		fs.StringVar(&prefix, "ledger-prefix", redisledger.DefaultPrefix, "the Redis ledger's key `prefix`")
		fs.StringVar(&schema, "schema", pgledger.DefaultSchema, "the Postgres ledger's `schema`")
		if _, err := a.parse(fs, args, 0); err != nil {
			return err
		}
		cutoff, err := parseCutoff(before, time.Now())
		if err != nil {
			return a.badUsage(fs, "%v", err)
		}
		if (a.conn.redis == "") == (a.conn.pg == "") {
			return a.badUsage(fs, "prune: give the ledger: --redis URL or --pg URL (one of them)")
		}
		ctx, cancel := a.withTimeout(ctx)
		defer cancel()
		l, kind, done, err := a.openLedger(ctx, prefix, schema)
		if err != nil {
			return err
		}
		defer done()
		p, ok := l.(ledger.Pruner)
		if !ok {
			return fmt.Errorf("prune: the %s ledger (%T) does not implement ledger.Pruner in this build of holdfast", kind, l)
		}
		out := pruneJSON{Ledger: kind, Before: cutoff.UTC(), DryRun: dryRun}
		if !dryRun {
			if out.Deleted, err = p.Prune(ctx, cutoff); err != nil {
				return fmt.Errorf("prune: %w", err)
			}
		}
		if a.machine() {
			return a.printJSON(out)
		}
		if dryRun {
			fmt.Fprintf(a.stdout, "dry run: would delete the done slot records before %s from the %s ledger; nothing deleted\n",
				out.Before.Format(time.RFC3339), kind)
			return nil
		}
		fmt.Fprintf(a.stdout, "deleted %d slot record(s) before %s from the %s ledger\n", out.Deleted, out.Before.Format(time.RFC3339), kind)
		return nil
	}
	return c
}

// parseCutoff reads --before: a positive duration back from now, or an
// RFC 3339 time.
func parseCutoff(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, fmt.Errorf("--before is required")
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d <= 0 {
			return time.Time{}, fmt.Errorf("--before %q: a duration back from now must be positive", v)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("--before %q: want a duration (720h) or an RFC 3339 time", v)
	}
	return t, nil
}

// openLedger opens the ledger of --redis or --pg; done closes it.
func (a *app) openLedger(ctx context.Context, prefix, schema string) (ledger.Ledger, string, func(), error) {
	if a.conn.redis != "" {
		rdb, err := a.openRedis()
		if err != nil {
			return nil, "", nil, err
		}
		l, err := redisledger.New(rdb, redisledger.Options{Prefix: prefix})
		if err != nil {
			_ = rdb.Close()
			return nil, "", nil, &codedError{code: exitUsage, err: err}
		}
		return l, "redis", func() { _ = rdb.Close() }, nil
	}
	conn, err := a.openPG(ctx)
	if err != nil {
		return nil, "", nil, err
	}
	done := func() { _ = conn.Close(context.WithoutCancel(ctx)) }
	l, err := pgledger.New(conn, pgledger.Options{Schema: schema})
	if err != nil {
		done()
		return nil, "", nil, &codedError{code: exitUsage, err: err}
	}
	return l, "pg", done, nil
}
