package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/lease/pglease"
	"github.com/holdfast-go/holdfast/lease/redislease"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
	"github.com/holdfast-go/holdfast/sinks/redisfence"
)

// defaultResetIdle is fence reset pg's --idle: a fence raised less than
// this long ago is in active use.
const defaultResetIdle = 10 * time.Minute

func fenceResetCommand() command {
	c := command{
		name: "fence reset", args: "pg|redis --resource R --scope S --reason TEXT [--force]", summary: "remove a poisoned fence (audited)",
		help: `Commands:
  fence reset pg --resource R --scope S --reason TEXT     remove a pgfence guard's fence of (R, S)
  fence reset redis --resource KEY --scope S --reason TEXT remove a redisfence fence of (KEY, S)`,
	}
	c.run = func(ctx context.Context, a *app, args []string) error {
		return a.dispatch(ctx, c, args, fenceResetStoreCommand("pg"), fenceResetStoreCommand("redis"))
	}
	return c
}

// resetFlags are the flags of fence reset pg and fence reset redis.
type resetFlags struct {
	sinkFlags
	reason, actor, prefix string
	leaseSchema           string // pg only: pglease's schema, for the held-lease check
	pgLeases              bool   // pg only: the lease check may read pglease through --pg
	expect                uint64
	idle                  time.Duration // pg only
	force                 bool
}

// resetJSON is the -o json output of fence reset: never the owner.
type resetJSON struct {
	Kind          string      `json:"kind"` // pg or redis
	Resource      string      `json:"resource"`
	Scope         string      `json:"scope"`
	PreviousToken fence.Token `json:"previous_token,string"`
	Reason        string      `json:"reason"`
	Forced        bool        `json:"forced"`
	// LeaseChecked: the lease named by the scope was found and read (not
	// held, or --force); false when --force skipped a check that could not
	// run.
	LeaseChecked bool `json:"lease_checked"`
}

func fenceResetStoreCommand(kind string) command {
	c := command{
		name: "fence reset " + kind, args: "--resource R --scope S --reason TEXT [--force]",
		summary: "remove a " + kind + " fence",
		help: `Removes the fence of (resource, scope), so that the next write of any
holder of the scope is accepted again: the way out of a fence raised by a
token no holder was issued (a forged or corrupted token; issue 32). It
prints the token removed and logs a fence_reset audit event on stderr
(resource, scope, previous token, the lease's last token, whether the
lease was checked, reason, actor; never the owner).

Removing a fence lets a paused holder's late write in, so the command
refuses (exit 4) a fence in active use, unless --force:
  - the lease named by the scope is held (read from --redis with --prefix,
    else --admin, else, for pg, from Postgres through --pg in --lease-schema
    (pglease)); without any the command refuses (exit 2), and when the
    source has no record of that lease at all (a lease's token counter is
    kept for ever once taken, so the prefix is wrong or there never was
    such a lease) it refuses too (exit 4);
  - pg: the fence was raised less than --idle ago (by the database clock);
  - the fence changed since it was read (--expect, default the token read
    just before): a holder raised it meanwhile.
A fence whose token is above the lease's last token (holdfast fence get lease
SCOPE) was never issued to a holder. Exit 3 when there is no fence.

Examples:
  holdfast fence reset pg --pg postgres://root@127.0.0.1/test --redis redis://127.0.0.1:6379/0 \
    --resource /v1/payouts --scope push --reason 'forged token, INC-2041'
  holdfast fence reset redis --resource 'balance:{42}' --scope 'settle|eu' --reason 'INC-2041' --expect 1796774400000000`,
	}
	c.run = func(ctx context.Context, a *app, args []string) error {
		var f resetFlags
		fs := a.flagSet(c)
		fs.StringVar(&f.resource, "resource", "", "the fenced `resource` (required)")
		fs.StringVar(&f.scope, "scope", "", "the fence `scope`: the writers' lease name")
		fs.StringVar(&f.reason, "reason", "", "why, for the audit event (required)")
		fs.StringVar(&f.actor, "actor", "", "who, for the audit event (default $USER)")
		fs.Uint64Var(&f.expect, "expect", 0, "reset only while the fence holds this `token` (default: the token read first)")
		fs.BoolVar(&f.force, "force", false, "reset a fence in active use")
		fs.StringVar(&f.prefix, "prefix", redislease.DefaultPrefix, "lease key `prefix`, for the held-lease check (lease.Options.Prefix)")
		if kind == "pg" {
			fs.StringVar(&f.schema, "schema", pgfence.DefaultSchema, "the guard table's `schema`")
			fs.StringVar(&f.table, "table", pgfence.DefaultTable, "the guard `table`")
			fs.DurationVar(&f.idle, "idle", defaultResetIdle, "a fence raised less than this long ago is in active use")
			fs.StringVar(&f.leaseSchema, "lease-schema", pglease.DefaultSchema, "pglease's `schema`, for the held-lease check through --pg when neither --redis nor --admin is given (pglease.Options.Schema)")
			f.pgLeases = true
		}
		if _, err := a.parse(fs, args, 0); err != nil {
			return err
		}
		switch {
		case f.resource == "":
			return a.badUsage(fs, "--resource is required")
		case strings.TrimSpace(f.reason) == "":
			// The one line alone, not lost above the full help.
			return usagef("--reason is required: say why, for the audit log (holdfast %s --help)", c.name)
		case f.idle < 0:
			return a.badUsage(fs, "--idle %v: want >= 0", f.idle)
		}
		if f.actor == "" {
			f.actor = a.getenv("USER")
		}
		if strings.TrimSpace(f.actor) == "" {
			fmt.Fprintln(a.stderr, `holdfast: warning: no --actor and $USER is empty: the audit event records actor "unknown"`)
			f.actor = "unknown"
		}
		ctx, cancel := a.withTimeout(ctx)
		defer cancel()
		leaseToken, leaseChecked, err := a.resetLeaseCheck(ctx, f)
		if err != nil {
			return err
		}
		var prev fence.Token
		if kind == "pg" {
			prev, err = a.resetPG(ctx, f)
		} else {
			prev, err = a.resetRedis(ctx, f)
		}
		if err != nil {
			return err
		}
		attrs := []slog.Attr{
			slog.String("store", kind), slog.String("resource", f.resource), slog.String("scope", f.scope),
			slog.Uint64("previous_token", uint64(prev)), slog.String("reason", f.reason),
			slog.String("actor", f.actor), slog.Bool("forced", f.force), slog.Bool("lease_checked", leaseChecked),
		}
		if leaseToken != fence.None {
			attrs = append(attrs, slog.Uint64("lease_token", uint64(leaseToken)))
		}
		slog.New(slog.NewJSONHandler(a.stderr, nil)).LogAttrs(ctx, slog.LevelWarn, "fence_reset", attrs...)
		if a.machine() {
			return a.printJSON(resetJSON{Kind: kind, Resource: f.resource, Scope: f.scope, PreviousToken: prev, Reason: f.reason, Forced: f.force, LeaseChecked: leaseChecked})
		}
		t := a.table("PREVIOUS_TOKEN")
		t.row(prev.String())
		return t.flush()
	}
	return c
}

// resetLeaseCheck refuses a reset while the lease named by the scope is
// held, and returns the lease's last token and whether the lease was found
// and read. Unless --force it also refuses when it cannot tell: no lease
// source (--redis, --admin; a usage error), scope "" (no lease), or a
// source with no record of the lease at all (a lease's token counter is
// kept for ever once taken, so no counter means a wrong --prefix or no such
// lease). With --force those are warnings and checked is false.
func (a *app) resetLeaseCheck(ctx context.Context, f resetFlags) (token fence.Token, checked bool, err error) {
	unchecked := func(refusal error) (fence.Token, bool, error) {
		if !f.force {
			return fence.None, false, refusal
		}
		fmt.Fprintf(a.stderr, "holdfast: warning: the lease of scope %q was not checked (--force): %v\n", f.scope, refusal)
		return fence.None, false, nil
	}
	// The lease source: --redis, else --admin, else (pg) pglease through --pg.
	lf := leaseFlags{prefix: f.prefix, schema: f.leaseSchema, pg: f.pgLeases && a.conn.redis == "" && a.conn.admin == "" && a.conn.pg != ""}
	switch {
	case a.conn.redis == "" && a.conn.admin == "" && !lf.pg:
		return unchecked(usagef("cannot check whether the lease of scope %q is held without a lease source: give --redis (and --prefix) or --admin, or --force to reset unchecked", f.scope))
	case f.scope == "":
		return unchecked(&codedError{code: exitRefused, err: errors.New(`scope "" names no lease, so whether a holder is writing cannot be checked; --force to reset unchecked`)})
	}
	l, err := a.inspectLease(ctx, lf, f.scope)
	if err != nil {
		return unchecked(fmt.Errorf("check the lease %q (--force to skip): %w", f.scope, err))
	}
	if l.Token == fence.None && !l.Held {
		where, fix := "the admin handler", "--admin"
		switch {
		case a.conn.redis != "":
			where, fix = fmt.Sprintf("Redis under --prefix %q", f.prefix), "--prefix"
		case lf.pg:
			where, fix = fmt.Sprintf("Postgres (pglease) in --lease-schema %q", f.leaseSchema), "--lease-schema"
		}
		return unchecked(&codedError{code: exitRefused, err: fmt.Errorf(
			"%s has no record of lease %q: a lease's token counter is kept for ever once taken, so the source is wrong or no such lease was ever taken; fix %s, or --force to reset unchecked", where, f.scope, fix)})
	}
	if l.Held && !f.force {
		return l.Token, true, &codedError{code: exitRefused, err: fmt.Errorf(
			"lease %q is held (token %d): a holder may be writing under this fence; stop it first, or --force", f.scope, l.Token)}
	}
	return l.Token, true, nil
}

// resetPG resets a pgfence guard's fence and returns the token removed.
func (a *app) resetPG(ctx context.Context, f resetFlags) (fence.Token, error) {
	guard, err := pgfence.New(pgfence.Options{Schema: f.schema, Table: f.table})
	if err != nil {
		return fence.None, &codedError{code: exitUsage, err: err}
	}
	conn, err := a.openPG(ctx)
	if err != nil {
		return fence.None, err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	expect := fence.Token(f.expect)
	if expect == fence.None {
		if expect, _, err = guard.Current(ctx, conn, f.resource, f.scope); err != nil {
			return fence.None, sinkError(err)
		}
		if expect == fence.None {
			return fence.None, notFoundf("pgfence %s scope %q: no fence", f.resource, f.scope)
		}
	}
	opts := pgfence.ResetOptions{Expect: expect, IdleFor: f.idle}
	if f.force {
		opts.IdleFor = 0
	}
	res, err := guard.Reset(ctx, conn, f.resource, f.scope, opts)
	switch {
	case errors.Is(err, pgfence.ErrFenceActive):
		return fence.None, &codedError{code: exitRefused, err: fmt.Errorf("%w (--idle %v); --force to reset anyway", err, f.idle)}
	case errors.Is(err, pgfence.ErrFenceChanged):
		return fence.None, &codedError{code: exitRefused, err: err}
	case err != nil:
		return fence.None, sinkError(err)
	case res.Token == fence.None:
		return fence.None, notFoundf("pgfence %s scope %q: no fence", f.resource, f.scope)
	}
	return res.Token, nil
}

// resetRedis resets a redisfence fence and returns the token removed.
func (a *app) resetRedis(ctx context.Context, f resetFlags) (fence.Token, error) {
	rdb, err := a.openRedis()
	if err != nil {
		return fence.None, err
	}
	defer func() { _ = rdb.Close() }()
	w, err := redisfence.New(rdb)
	if err != nil {
		return fence.None, err
	}
	expect := fence.Token(f.expect)
	if expect == fence.None {
		if expect, _, err = w.Current(ctx, f.resource, f.scope); err != nil {
			return fence.None, sinkError(err)
		}
		if expect == fence.None {
			return fence.None, notFoundf("redisfence %s scope %q: no fence", f.resource, f.scope)
		}
	}
	prev, err := w.Reset(ctx, f.resource, f.scope, expect)
	switch {
	case errors.Is(err, redisfence.ErrFenceChanged):
		return fence.None, &codedError{code: exitRefused, err: err}
	case err != nil:
		return fence.None, sinkError(err)
	case prev == fence.None:
		return fence.None, notFoundf("redisfence %s scope %q: no fence", f.resource, f.scope)
	}
	return prev, nil
}
