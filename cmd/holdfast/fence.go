package main

import (
	"context"
	"errors"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/lease/pglease"
	"github.com/holdfast-go/holdfast/lease/redislease"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
	"github.com/holdfast-go/holdfast/sinks/redisfence"
)

func fenceCommand() command {
	return group("fence", "fencing tokens: get a lease's counter or a sink's fence; reset a poisoned fence",
		`get reads: the lease's counter (the last token issued), the highest token a
pgfence guard or a redisfence fence accepted. reset removes a poisoned fence
(audited; refused while the lease is in use).`,
		fenceGetCommand, fenceResetCommand)
}

func fenceGetCommand() command {
	c := command{
		name: "fence get", args: "lease|pg|redis ...", summary: "read a fencing token: a lease's counter, a sink's fence",
		help: `Commands:
  fence get lease NAME                      the lease's fencing counter (the last token issued)
  fence get pg --resource R --scope S       the highest token the pgfence guard accepted
  fence get redis --resource KEY --scope S  the highest token the redisfence fence of KEY accepted`,
	}
	c.run = func(ctx context.Context, a *app, args []string) error {
		return a.dispatch(ctx, c, args, fenceLeaseCommand(), fencePGCommand(), fenceRedisCommand())
	}
	return c
}

// fenceJSON is the -o json output of the fence commands.
type fenceJSON struct {
	Kind     string      `json:"kind"` // lease, pg or redis
	Name     string      `json:"name,omitempty"`
	Resource string      `json:"resource,omitempty"`
	Scope    string      `json:"scope,omitempty"`
	Token    fence.Token `json:"token,string"`
	// OwnerID is fence.OwnerID of the fence's owner: the owner itself is
	// a write capability and is never printed.
	OwnerID string `json:"owner_id,omitempty"`
}

// printFence prints f (the token alone in a table, for shell use) and
// returns a not-found error when no token is stored.
func (a *app) printFence(f fenceJSON, what string) error {
	if a.machine() {
		if err := a.printJSON(f); err != nil {
			return err
		}
	} else if f.Token != fence.None {
		t := a.table("TOKEN", "OWNER ID")
		t.row(f.Token.String(), f.OwnerID)
		if err := t.flush(); err != nil {
			return err
		}
	}
	if f.Token == fence.None {
		return notFoundf("%s: no token stored", what)
	}
	return nil
}

func fenceLeaseCommand() command {
	c := command{
		name: "fence get lease", args: "NAME", summary: "a lease's fencing counter",
		help: `Prints the lease's fencing counter: the last token issued for NAME (the
holder's token while it is held). Exit 3 when none was ever issued. Reads
Redis (--redis), else Postgres (--pg: pglease's table in --schema), else
the admin handler (--admin), as lease show does.

Examples:
  holdfast fence get lease 'settle|eu' --redis redis://127.0.0.1:6379/0
  holdfast fence get lease 'settle|eu' --pg postgres://root@127.0.0.1/test
  holdfast fence get lease report -o json`,
	}
	c.run = func(ctx context.Context, a *app, args []string) error {
		lf := leaseFlags{pg: true}
		fs := a.flagSet(c)
		fs.StringVar(&lf.prefix, "prefix", redislease.DefaultPrefix, "lease key `prefix` (lease.Options.Prefix; --redis only)")
		fs.StringVar(&lf.schema, "schema", pglease.DefaultSchema, "lease table's `schema` (pglease.Options.Schema; --pg only)")
		pos, err := a.parse(fs, args, 1)
		if err != nil {
			return err
		}
		ctx, cancel := a.withTimeout(ctx)
		defer cancel()
		l, err := a.inspectLease(ctx, lf, pos[0])
		if err != nil {
			return err
		}
		return a.printFence(fenceJSON{Kind: "lease", Name: l.Name, Token: l.Token, OwnerID: l.OwnerID}, "lease "+l.Name)
	}
	return c
}

// sinkFlags are the flags of fence pg and fence redis.
type sinkFlags struct {
	resource, scope string
	schema, table   string // pg only
}

func fencePGCommand() command {
	c := command{
		name: "fence get pg", args: "--resource R --scope S [--schema S] [--table T]", summary: "a pgfence guard's token",
		help: `Prints the token and owner id the pgfence guard holds for (resource, scope):
the highest token of that scope it accepted a write for. The scope is the
lease name of the writers (fence.Holder.Scope). Exit 3 when none.

Examples:
  holdfast fence get pg --pg postgres://root@127.0.0.1/test --resource account:42 --scope 'settle|eu'
  holdfast fence get pg --resource account:42 --scope report --schema billing -o json`,
	}
	c.run = func(ctx context.Context, a *app, args []string) error {
		var f sinkFlags
		fs := a.flagSet(c)
		fs.StringVar(&f.resource, "resource", "", "the guarded `resource` (required)")
		fs.StringVar(&f.scope, "scope", "", "the fence `scope`: the writers' lease name")
		fs.StringVar(&f.schema, "schema", pgfence.DefaultSchema, "the guard table's `schema`")
		fs.StringVar(&f.table, "table", pgfence.DefaultTable, "the guard `table`")
		if _, err := a.parse(fs, args, 0); err != nil {
			return err
		}
		if f.resource == "" {
			return a.badUsage(fs, "--resource is required")
		}
		guard, err := pgfence.New(pgfence.Options{Schema: f.schema, Table: f.table})
		if err != nil {
			return &codedError{code: exitUsage, err: err}
		}
		ctx, cancel := a.withTimeout(ctx)
		defer cancel()
		conn, err := a.openPG(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
		token, owner, err := guard.Current(ctx, conn, f.resource, f.scope)
		if err != nil {
			return sinkError(err)
		}
		return a.printFence(fenceJSON{Kind: "pg", Resource: f.resource, Scope: f.scope, Token: token, OwnerID: fence.OwnerID(owner)},
			"pgfence "+f.resource)
	}
	return c
}

func fenceRedisCommand() command {
	c := command{
		name: "fence get redis", args: "--resource KEY --scope S", summary: "a redisfence fence's token",
		help: `Prints the token and owner id the redisfence fence of KEY (redisfence.FenceKey, a
hash per scope) holds for the scope: the highest token of that scope it
accepted a write for. Exit 3 when none.

Examples:
  holdfast fence get redis --redis redis://127.0.0.1:6379/0 --resource 'balance:{42}' --scope 'settle|eu'
  holdfast fence get redis --resource 'balance:{42}' --scope report -o json`,
	}
	c.run = func(ctx context.Context, a *app, args []string) error {
		var f sinkFlags
		fs := a.flagSet(c)
		fs.StringVar(&f.resource, "resource", "", "the fenced Redis `key` (required)")
		fs.StringVar(&f.scope, "scope", "", "the fence `scope`: the writers' lease name")
		if _, err := a.parse(fs, args, 0); err != nil {
			return err
		}
		if f.resource == "" {
			return a.badUsage(fs, "--resource is required")
		}
		rdb, err := a.openRedis()
		if err != nil {
			return err
		}
		defer func() { _ = rdb.Close() }()
		ctx, cancel := a.withTimeout(ctx)
		defer cancel()
		w, err := redisfence.New(rdb)
		if err != nil {
			return err
		}
		token, owner, err := w.Current(ctx, f.resource, f.scope)
		if err != nil {
			return sinkError(err)
		}
		return a.printFence(fenceJSON{Kind: "redis", Resource: f.resource, Scope: f.scope, Token: token, OwnerID: fence.OwnerID(owner)},
			"redisfence "+f.resource)
	}
	return c
}

// sinkError gives the sinks' input errors the usage exit code.
func sinkError(err error) error {
	for _, target := range []error{
		pgfence.ErrInvalidResource, pgfence.ErrInvalidScope, pgfence.ErrInvalidOptions,
		redisfence.ErrInvalidKey,
	} {
		if errors.Is(err, target) {
			return &codedError{code: exitUsage, err: err}
		}
	}
	return err
}
