package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/pglease"
	"github.com/holdfast-go/holdfast/lease/redislease"
	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

func leaseCommand() command {
	return group("lease", "leases: list them, show one, run a command under one",
		`ls and show read Redis when --redis (or REDIS_URL) names it, else Postgres
(pglease, --schema) when --pg (or DATABASE_URL) does, else the admin handler
(--admin or HOLDFAST_ADMIN): with both set, Redis wins. A flag wins over its
variable, even empty: --redis "" --admin URL reads the admin handler with
REDIS_URL set. run needs Redis.`,
		leasesLsCommand, leasesShowCommand, leaseRunCommand)
}

// dispatch runs the subcommand of group named by args[0]; --help (or
// none) prints the group's help.
func (a *app) dispatch(ctx context.Context, group command, args []string, subs ...command) error {
	if len(args) > 0 {
		for _, c := range subs {
			if c.name == group.name+" "+args[0] {
				return c.run(ctx, a, args[1:])
			}
		}
	}
	w, err := a.stdout, error(nil)
	if len(args) == 0 || (args[0] != "-h" && args[0] != "--help" && args[0] != "help") {
		w, err = a.stderr, errFlagParse
		fmt.Fprintf(w, "holdfast %s: want a subcommand, got %q\n\n", group.name, redactArgs(args))
	}
	fmt.Fprintf(w, "Usage: holdfast %s %s\n\n%s\n\nholdfast %s SUBCOMMAND --help for its flags and examples.\n\n%s",
		group.name, group.args, strings.TrimSpace(group.help), group.name, exitCodesHelp)
	return err
}

// leaseFlags are the flags of the direct Redis reading of leases.
type leaseFlags struct {
	prefix string // --prefix, Redis
	schema string // --schema, Postgres
	pg     bool   // read Postgres (--pg) directly: lease ls and show only
}

func leasesLsCommand() command {
	c := command{
		name: "lease ls", args: "[--match GLOB] [--prefix P] [--limit N]", summary: "list leases",
		help: `Lists the leases whose name matches GLOB (Redis SCAN MATCH syntax), sorted by
name: held ones with their holder label (lease.Options.Holder), their owner
id (a hash of the owner, which is never shown: it is a write capability) and
the TTL left, released or expired ones with their last token. The scheduler's
leases are named JOB (the "" partition) and JOB|PARTITION. At most --limit
(default 1000), the first by name; a list that reaches the limit says so on
stderr.

Reads Redis when --redis (or REDIS_URL) names it, else Postgres (pglease,
--schema) when --pg (or DATABASE_URL) does, else the admin handler
(--admin or HOLDFAST_ADMIN): with both set, Redis wins. A flag wins over
its variable, even empty: --redis "" --admin URL reads the admin handler
with REDIS_URL set.

Examples:
  holdfast lease ls --redis redis://127.0.0.1:6379/0
  holdfast lease ls --match 'settle|*' -o json
  holdfast lease ls --admin http://127.0.0.1:8080/admin/ --token "$TOKEN"`,
	}
	c.run = func(ctx context.Context, a *app, args []string) error {
		lf := leaseFlags{pg: true}
		var match string
		var limit int
		fs := a.flagSet(c)
		fs.StringVar(&lf.prefix, "prefix", redislease.DefaultPrefix, "lease key `prefix` (lease.Options.Prefix; --redis only)")
		fs.StringVar(&lf.schema, "schema", pglease.DefaultSchema, "lease table's `schema` (pglease.Options.Schema; --pg only)")
		fs.StringVar(&match, "match", "", "`glob` over lease names (default all)")
		fs.IntVar(&limit, "limit", 1000, "at most `N` leases, the first by name")
		if _, err := a.parse(fs, args, 0); err != nil {
			return err
		}
		if limit < 1 {
			return a.badUsage(fs, "--limit %d: at least 1", limit)
		}
		ctx, cancel := a.withTimeout(ctx)
		defer cancel()
		leases, err := a.listLeases(ctx, lf, match, limit)
		if err != nil {
			return err
		}
		if len(leases) >= limit {
			// The output looks whole: say that it may not be (a fresh
			// user's trial listed 1000 of 2003 without a word).
			fmt.Fprintf(a.stderr, "holdfast: lease ls: showing the first %d leases by name; there may be more (--limit, --match)\n", limit)
		}
		return a.printLeases(leases)
	}
	return c
}

func leasesShowCommand() command {
	c := command{
		name: "lease show", args: "NAME", summary: "show one lease",
		help: `Shows one lease: held or not, its holder label and owner id, the TTL left, its fencing
counter (the holder's token when held) and the waiting flag. Exit 3 when no
token was ever issued for NAME.

Reads Redis when --redis (or REDIS_URL) names it, else Postgres (pglease,
--schema) when --pg (or DATABASE_URL) does, else the admin handler
(--admin or HOLDFAST_ADMIN): with both set, Redis wins. A flag wins over
its variable, even empty: --redis "" --admin URL reads the admin handler
with REDIS_URL set.

Examples:
  holdfast lease show 'settle|eu' --redis redis://127.0.0.1:6379/0
  holdfast lease show report -o json`,
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
		if a.machine() {
			if err := a.printJSON(l); err != nil {
				return err
			}
		} else {
			t := a.table("FIELD", "VALUE")
			t.row("name", l.Name)
			t.row("held", yesNo(l.Held))
			t.row("holder", l.Holder)
			t.row("owner id", l.OwnerID)
			t.row("ttl", ttlText(l))
			t.row("token", l.Token.String())
			t.row("waiting", yesNo(l.Waiting))
			if err := t.flush(); err != nil {
				return err
			}
		}
		if !l.Held && l.Token == 0 {
			return notFoundf("lease %q: never acquired (no token issued)", l.Name)
		}
		return nil
	}
	return c
}

func ttlText(l schedhttp.LeaseJSON) string {
	if !l.Held {
		return ""
	}
	return fmtMS(l.TTLMS)
}

func (a *app) printLeases(leases []schedhttp.LeaseJSON) error {
	if a.machine() {
		return a.printJSON(schedhttp.LeasesPage{Leases: leases})
	}
	t := a.table("NAME", "HELD", "HOLDER", "OWNER ID", "TTL", "TOKEN", "WAITING")
	for _, l := range leases {
		t.row(l.Name, yesNo(l.Held), l.Holder, l.OwnerID, ttlText(l), l.Token.String(), yesNo(l.Waiting))
	}
	return t.flush()
}

// listLeases reads the leases from Redis (--redis) or the admin handler.
func (a *app) listLeases(ctx context.Context, lf leaseFlags, match string, limit int) ([]schedhttp.LeaseJSON, error) {
	if a.conn.redis == "" && !(lf.pg && a.conn.pg != "") && a.conn.admin != "" {
		c, err := a.adminClient()
		if err != nil {
			return nil, err
		}
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		if match != "" {
			q.Set("match", match)
		}
		var page schedhttp.LeasesPage
		if err := c.do(ctx, "GET", c.url(q, "leases"), nil, &page); err != nil {
			return nil, err
		}
		return page.Leases, nil
	}
	b, done, err := a.leaseBackend(ctx, lf)
	if err != nil {
		return nil, err
	}
	defer done()
	infos, err := b.List(ctx, match, limit)
	if err != nil {
		return nil, leaseError(err)
	}
	out := make([]schedhttp.LeaseJSON, len(infos))
	for i, info := range infos {
		out[i] = leaseJSON(info)
	}
	return out, nil
}

// inspectLease reads one lease from Redis (--redis) or the admin handler
// (its list, filtered to the exact name: a name may hold glob characters).
func (a *app) inspectLease(ctx context.Context, lf leaseFlags, name string) (schedhttp.LeaseJSON, error) {
	if a.conn.redis == "" && !(lf.pg && a.conn.pg != "") && a.conn.admin != "" {
		leases, err := a.listLeases(ctx, lf, globEscape(name), 1)
		if err != nil {
			return schedhttp.LeaseJSON{}, err
		}
		for _, l := range leases {
			if l.Name == name {
				return l, nil
			}
		}
		return schedhttp.LeaseJSON{Name: name}, nil
	}
	b, done, err := a.leaseBackend(ctx, lf)
	if err != nil {
		return schedhttp.LeaseJSON{}, err
	}
	defer done()
	info, err := b.Inspect(ctx, name)
	if err != nil {
		return schedhttp.LeaseJSON{}, leaseError(err)
	}
	return leaseJSON(info), nil
}

// leaseBackend is the Inspector the command reads directly: Redis when
// --redis is set, else Postgres (pglease, --schema) when --pg is.
func (a *app) leaseBackend(ctx context.Context, lf leaseFlags) (leasedriver.Inspector, func(), error) {
	if a.conn.redis == "" && lf.pg && a.conn.pg != "" {
		conn, err := a.openPG(ctx)
		if err != nil {
			return nil, nil, err
		}
		b, err := pglease.New(conn, pglease.Options{Schema: lf.schema})
		if err != nil {
			_ = conn.Close(context.Background())
			return nil, nil, leaseError(err)
		}
		return b, func() { _ = conn.Close(context.Background()) }, nil
	}
	if a.conn.redis == "" {
		return nil, nil, usagef("%v", errNoAdmin)
	}
	rdb, err := a.openRedis()
	if err != nil {
		return nil, nil, err
	}
	b, err := redislease.NewBackend(rdb, redislease.Options{Prefix: lf.prefix})
	if err != nil {
		_ = rdb.Close()
		return nil, nil, leaseError(err)
	}
	return b, func() { _ = rdb.Close() }, nil
}

// leaseError gives bad names and options the usage exit code.
func leaseError(err error) error {
	if errors.Is(err, lease.ErrInvalidName) || errors.Is(err, lease.ErrInvalidOptions) {
		return &codedError{code: exitUsage, err: err}
	}
	return err
}

// leaseJSON is info in the admin API's shape, so that -o json reads the
// same from Redis and from the admin handler.
func leaseJSON(info leasedriver.Info) schedhttp.LeaseJSON {
	return schedhttp.LeaseJSON{
		Name: info.Name, Held: info.Held, OwnerID: info.OwnerID, Holder: info.Holder, TTLMS: info.TTL.Milliseconds(),
		Token: info.Token, Waiting: info.Waiting,
	}
}

// globEscape escapes the glob characters of name for SCAN MATCH.
func globEscape(name string) string {
	var out []byte
	for i := 0; i < len(name); i++ {
		switch name[i] {
		case '*', '?', '[', ']', '\\':
			out = append(out, '\\')
		}
		out = append(out, name[i])
	}
	return string(out)
}
