package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/pgledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

// pruneJSON is the -o json output of prune.
type pruneJSON struct {
	Ledger  string    `json:"ledger"` // redis or pg
	Before  time.Time `json:"before"`
	DryRun  bool      `json:"dry_run"`
	Deleted int64     `json:"deleted"`
	// WouldDelete and Slots are a dry run's: how many slot records Prune
	// would delete now, and the first --limit of them.
	WouldDelete int64                `json:"would_delete,omitempty"`
	Slots       []schedhttp.SlotJSON `json:"slots,omitempty"`
}

func pruneCommand() command {
	c := command{
		name: "ledger prune", args: "--before DURATION|RFC3339 [--dry-run] --redis URL|--pg URL",
		summary: "delete the ledger's done slot records older than a cutoff",
		help: `Deletes the records (and attempts) of done slots (succeeded, failed with no
attempt left, skipped, missed) before the cutoff, from the Redis ledger
(--redis, redisledger) or the Postgres ledger (--pg, pgledger), through
ledger.Pruner. Running, pending and retryable slots, each (job,
partition)'s fence, pause flags, horizons and latest slot are kept. A
deleted slot's own fence (OverlapAllow) is kept by the Redis ledger; the
Postgres ledger deletes it and closes the slot to every token instead. --before is a
duration back from now (720h) or an RFC 3339 time. --dry-run deletes
nothing: it prints how many slot records prune would delete now and the
first --limit of them (job, partition, slot), read with the same rule
(ledger.PrunePreviewer); it fails, as prune does, when the ledger cannot
prune.

The cutoff must be at least an hour (ledger.PruneMargin) before the
store's clock (Redis TIME, Postgres now()), whatever this host's clock
says: a later cutoff, one in the future above all, would close slots that
may still run, for good (an OverlapAllow job would stop). Such a cutoff
is refused, with and without --dry-run: exit 2, a message naming the
cutoff and the latest one allowed, nothing deleted.

Examples:
  holdfast ledger prune --redis redis://127.0.0.1:6379/0 --before 720h
  holdfast ledger prune --pg postgres://root@127.0.0.1/test --schema holdfast --before 2026-11-01T00:00:00Z
  holdfast ledger prune --redis "$REDIS_URL" --before 2160h --dry-run --limit 20`,
	}
	c.run = func(ctx context.Context, a *app, args []string) error {
		var before, prefix, schema string
		var dryRun bool
		var limit int
		fs := a.flagSet(c)
		fs.IntVar(&limit, "limit", 100, "--dry-run: list at most `N` slots")
		fs.StringVar(&before, "before", "", "the cutoff: a `duration` back from now (720h) or an RFC 3339 time, required")
		fs.BoolVar(&dryRun, "dry-run", false, "list what would be deleted, delete nothing")
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
		if dryRun {
			return a.prunePreview(ctx, l, out, max(limit, 1))
		}
		if out.Deleted, err = p.Prune(ctx, cutoff); err != nil {
			return pruneError("prune", err)
		}
		if a.machine() {
			return a.printJSON(out)
		}
		fmt.Fprintf(a.stdout, "deleted %d slot record(s) before %s from the %s ledger\n", out.Deleted, out.Before.Format(time.RFC3339), kind)
		return nil
	}
	return c
}

// prunePreview prints what a prune of out.Before would delete from l,
// deleting nothing.
func (a *app) prunePreview(ctx context.Context, l ledger.Ledger, out pruneJSON, limit int) error {
	pp, ok := l.(ledger.PrunePreviewer)
	if !ok {
		return fmt.Errorf("prune --dry-run: the %s ledger (%T) does not implement ledger.PrunePreviewer in this build of holdfast", out.Ledger, l)
	}
	slots, total, err := pp.PrunePreview(ctx, out.Before, limit)
	if err != nil {
		return pruneError("prune --dry-run", err)
	}
	out.WouldDelete = total
	for _, s := range slots {
		out.Slots = append(out.Slots, schedhttp.SlotJSON{Job: s.Job, Partition: s.Partition, Slot: schedhttp.Time{Time: s.At}})
	}
	if a.machine() {
		return a.printJSON(out)
	}
	fmt.Fprintf(a.stdout, "dry run: would delete %d slot record(s) before %s from the %s ledger; nothing deleted\n",
		total, out.Before.Format(time.RFC3339), out.Ledger)
	if len(slots) == 0 {
		return nil
	}
	t := a.table("JOB", "PARTITION", "SLOT")
	for _, s := range out.Slots {
		t.row(s.Job, s.Partition, fmtSlot(s.Slot))
	}
	if err := t.flush(); err != nil {
		return err
	}
	if more := total - int64(len(slots)); more > 0 {
		fmt.Fprintf(a.stdout, "... and %d more (--limit)\n", more)
	}
	return nil
}

// pruneError wraps a Prune or PrunePreview error: a cutoff the ledger
// refuses (ledger.ErrPruneCutoff) is bad input (exitUsage), anything else
// an error (exitError).
func pruneError(op string, err error) error {
	err = fmt.Errorf("%s: %w", op, err)
	if errors.Is(err, ledger.ErrPruneCutoff) {
		return &codedError{code: exitUsage, err: err}
	}
	return err
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
