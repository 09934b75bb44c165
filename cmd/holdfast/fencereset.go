package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/fence"
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
}

func fenceResetStoreCommand(kind string) command {
	c := command{
		name: "fence reset " + kind, args: "--resource R --scope S --reason TEXT [--force]",
		summary: "remove a " + kind + " fence",
		help: `Removes the fence of (resource, scope), so that the next write of any
holder of the scope is accepted again: the way out of a fence raised by a
token no holder was issued (a forged or corrupted token; issue 32). It
prints the token removed and logs a fence_reset audit event on stderr
(resource, scope, previous token, the lease's last token, reason, actor;
never the owner).

Removing a fence lets a paused holder's late write in, so the command
refuses (exit 4) a fence in active use, unless --force:
  - the lease named by the scope is held (read from --redis, or --admin);
  - pg: the fence was raised less than --idle ago (by the database clock);
  - the fence changed since it was read (--expect, default the token read
    just before): a holder raised it meanwhile.
A fence whose token is above the lease's last token (holdfast fence lease
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
		}
		if _, err := a.parse(fs, args, 0); err != nil {
			return err
		}
		switch {
		case f.resource == "":
			return a.badUsage(fs, "--resource is required")
		case strings.TrimSpace(f.reason) == "":
			return a.badUsage(fs, "--reason is required: say why, for the audit log")
		case f.idle < 0:
			return a.badUsage(fs, "--idle %v: want >= 0", f.idle)
		}
		if f.actor == "" {
			f.actor = a.getenv("USER")
		}
		ctx, cancel := a.withTimeout(ctx)
		defer cancel()
		leaseToken, err := a.resetLeaseCheck(ctx, f)
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
			slog.String("actor", f.actor), slog.Bool("forced", f.force),
		}
		if leaseToken != fence.None {
			attrs = append(attrs, slog.Uint64("lease_token", uint64(leaseToken)))
		}
		slog.New(slog.NewJSONHandler(a.stderr, nil)).LogAttrs(ctx, slog.LevelWarn, "fence_reset", attrs...)
		if a.conn.output == "json" {
			return a.printJSON(resetJSON{Kind: kind, Resource: f.resource, Scope: f.scope, PreviousToken: prev, Reason: f.reason, Forced: f.force})
		}
		t := a.table("PREVIOUS_TOKEN")
		t.row(prev.String())
		return t.flush()
	}
	return c
}

// resetLeaseCheck refuses a reset while the lease named by the scope is
// held (unless --force) and returns the lease's last token, when a lease
// source (--redis, --admin) is given and the scope names a lease.
func (a *app) resetLeaseCheck(ctx context.Context, f resetFlags) (fence.Token, error) {
	if f.scope == "" || (a.conn.redis == "" && a.conn.admin == "") {
		if !f.force {
			fmt.Fprintf(a.stderr, "holdfast: the lease of scope %q was not checked (no --redis or --admin, or scope \"\")\n", f.scope)
		}
		return fence.None, nil
	}
	l, err := a.inspectLease(ctx, f.prefix, f.scope)
	if err != nil {
		if f.force {
			return fence.None, nil
		}
		return fence.None, fmt.Errorf("check the lease %q (--force to skip): %w", f.scope, err)
	}
	if l.Held && !f.force {
		return l.Token, &codedError{code: exitRefused, err: fmt.Errorf(
			"lease %q is held (token %d): a holder may be writing under this fence; stop it first, or --force", f.scope, l.Token)}
	}
	return l.Token, nil
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
