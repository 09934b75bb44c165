package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// app is one run of the command: its output streams, its environment and
// the connection flags every subcommand shares. It holds all state; there
// is none at package level.
type app struct {
	stdin          io.Reader // --token-file -
	stdout, stderr io.Writer
	getenv         func(string) string
	conn           connFlags
}

// connFlags are the flags of every subcommand: where to connect and how to
// print.
type connFlags struct {
	redis   string        // --redis, REDIS_URL
	cluster bool          // --redis-cluster: --redis names a Cluster
	pg      string        // --pg, DATABASE_URL
	admin   string        // --admin, HOLDFAST_ADMIN
	token   string        // --token, HOLDFAST_TOKEN
	output  string        // -o: table or json
	timeout time.Duration // --timeout of one command (watch: of one refresh)

	// tokenFile is --token-file, HOLDFAST_TOKEN_FILE: the token's file,
	// "-" for stdin (resolveToken).
	tokenFile string
}

// command is one subcommand.
type command struct {
	name, args, summary string
	// help is the long description and examples.
	help string
	run  func(ctx context.Context, a *app, args []string) error
	// verbs are a noun's subcommands (group), for the completion scripts.
	verbs []func() command
}

// commands is the command table: nouns, each with its verbs (noun verb
// [args] [flags], as kubectl and etcdctl), and version.
func commands() []command {
	return []command{jobCommand(), leaseCommand(), fenceCommand(), ledgerCommand(), versionCommand()}
}

// group returns the command of a noun whose verbs are subs: it runs the
// verb args[0] names (a.dispatch); its help lists the verbs.
func group(name, summary, help string, subs ...func() command) command {
	var verbs []string
	var lines strings.Builder
	lines.WriteString("Commands:\n")
	for _, sub := range subs {
		c := sub()
		verbs = append(verbs, strings.TrimPrefix(c.name, name+" "))
		fmt.Fprintf(&lines, "  %s %s\n      %s\n", c.name, c.args, c.summary)
	}
	c := command{name: name, args: strings.Join(verbs, "|") + " ...", summary: summary,
		help: lines.String() + "\n" + strings.TrimSpace(help), verbs: subs}
	c.run = func(ctx context.Context, a *app, args []string) error {
		built := make([]command, len(subs))
		for i, sub := range subs {
			built[i] = sub()
		}
		return a.dispatch(ctx, c, args, built...)
	}
	return c
}

func jobCommand() command {
	return group("job", "jobs and their runs, through a service's admin handler: ls, show, runs, retry, trigger, backfill, pause, resume, watch",
		`Every job verb calls a running service's admin handler (scheduler/schedhttp):
--admin URL (HOLDFAST_ADMIN) and --token-file F or --token T.`,
		jobsCommand, jobShowCommand, runsCommand, retryCommand, triggerCommand, backfillCommand,
		pauseCommand, resumeCommand, watchCommand)
}

func ledgerCommand() command {
	return group("ledger", "the run ledger, read directly: prune", "", pruneCommand)
}

// run is the command's entry point: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{stdin: os.Stdin, stdout: stdout, stderr: stderr, getenv: os.Getenv}
	return a.main(ctx, args)
}

func (a *app) main(ctx context.Context, args []string) int {
	if len(args) == 0 {
		a.usage(a.stderr)
		return exitUsage
	}
	if args[0] == "--version" || args[0] == "-version" {
		// The version command, with the rest: -o json works, and an
		// extra argument is a usage error, as after "version".
		args = append([]string{"version"}, args[1:]...)
	}
	args = commandFirst(args)
	name := args[0]
	if isHelp(name) {
		if len(args) > 1 && !isHelp(args[1]) { // help COMMAND: the command's --help
			return a.main(ctx, []string{args[1], "--help"})
		}
		a.usage(a.stdout)
		return exitOK
	}
	for _, c := range append(commands(), completionCommand()) {
		if c.name == name {
			err := c.run(ctx, a, args[1:])
			return a.report(err)
		}
	}
	fmt.Fprintf(a.stderr, "holdfast: unknown command %q\n\n", redactArgs([]string{name})[0])
	a.usage(a.stderr)
	return exitUsage
}

// report prints err (unless the flag package printed it already) and
// returns its exit code.
func (a *app) report(err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errFlagParse):
		return exitUsage // the flag package printed the error and the usage
	}
	if qe := (*quietError)(nil); errors.As(err, &qe) {
		return codeOf(err) // lease run's CMD failed and said so itself
	}
	fmt.Fprintf(a.stderr, "holdfast: %s\n", printable(redactText(err.Error())))
	return codeOf(err)
}

func (a *app) usage(w io.Writer) {
	fmt.Fprint(w, "holdfast: operate holdfast leases, fences, jobs and the ledger.\n\n")
	fmt.Fprint(w, "Usage: holdfast NOUN VERB [args] [flags]   (holdfast NOUN --help lists its verbs; holdfast NOUN VERB --help gives flags and examples)\n\nCommands:\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range append(commands(), completionCommand()) {
		fmt.Fprintf(tw, "  %s\t%s\n", c.name, c.summary)
	}
	_ = tw.Flush()
	fmt.Fprint(w, "\nOutput: -o table (default), json or jsonl, on every command.\n")
	fmt.Fprint(w, "\nConnections (flags of every command, or the environment):\n"+
		"  --redis URL   Redis, redis://host:6379/0 (REDIS_URL); with --redis-cluster a\n"+
		"                Cluster, redis://host:port?addr=host2:port2\n"+
		"  --pg URL      Postgres, postgres://user@host/db (DATABASE_URL)\n"+
		"  --admin URL   a service's admin handler, http://host:8080/admin/ (HOLDFAST_ADMIN)\n"+
		"  --token-file F  a file holding the admin handler's Bearer token, - for stdin\n"+
		"                (HOLDFAST_TOKEN_FILE): unlike --token, out of ps and shell history\n"+
		"  --token T     the admin handler's Bearer token (HOLDFAST_TOKEN)\n\n")
	fmt.Fprint(w, exitCodesHelp)
}

// errFlagParse marks a flag error the flag package has printed.
var errFlagParse = errors.New("bad flags")

// flagSet returns the flag set of command c with the connection flags.
// Parse it with a.parse.
func (a *app) flagSet(c command) *flag.FlagSet {
	fs := flag.NewFlagSet("holdfast "+c.name, flag.ContinueOnError)
	fs.SetOutput(a.stderr)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: holdfast %s %s\n\n%s\n", c.name, c.args, strings.TrimSpace(c.help))
		fmt.Fprint(w, "\nFlags:\n")
		printFlags(w, fs)
		fmt.Fprint(w, "\n"+exitCodesHelp)
	}
	// The environment is read after parsing (a.parse), not put in the
	// defaults: --help would print a token or a password in a URL.
	fs.StringVar(&a.conn.redis, "redis", "", "Redis `URL` (default $REDIS_URL)")
	fs.BoolVar(&a.conn.cluster, "redis-cluster", false, "--redis names a Redis Cluster (redis://host:port?addr=host2:port2)")
	fs.StringVar(&a.conn.pg, "pg", "", "Postgres `URL` (default $DATABASE_URL)")
	fs.StringVar(&a.conn.admin, "admin", "", "admin handler base `URL` (default $HOLDFAST_ADMIN)")
	fs.StringVar(&a.conn.token, "token", "", "admin Bearer `token` (default $HOLDFAST_TOKEN); visible in ps: prefer --token-file")
	fs.StringVar(&a.conn.tokenFile, "token-file", "", "`file` holding the admin Bearer token, - for stdin (default $HOLDFAST_TOKEN_FILE)")
	fs.StringVar(&a.conn.output, "o", "table", "") // printed as -o, --output (printFlags)
	fs.StringVar(&a.conn.output, "output", "table", "output `format`: table, json (one document) or jsonl (one JSON object a line: a list's items, watch's events)")
	fs.DurationVar(&a.conn.timeout, "timeout", 10*time.Second, "bound of the command's calls, positive")
	return fs
}

// connEnv fills each connection flag not given from its environment
// variable; a flag given, even empty (--redis ""), wins.
func (a *app) connEnv(fs *flag.FlagSet) {
	for _, e := range []struct {
		flag, env string
		v         *string
	}{
		{"redis", "REDIS_URL", &a.conn.redis},
		{"pg", "DATABASE_URL", &a.conn.pg},
		{"admin", "HOLDFAST_ADMIN", &a.conn.admin},
		{"token", "HOLDFAST_TOKEN", &a.conn.token},
	} {
		if !isSet(fs, e.flag) {
			*e.v = a.getenv(e.env)
		}
	}
}

// parseFlags parses args into fs and prints the usage once: on stdout for
// --help, on stderr after a bad flag (the flag package printed the error).
func (a *app) parseFlags(fs *flag.FlagSet, args []string) error {
	usage := fs.Usage
	fs.Usage = func() {} // the flag package would print it before returning ErrHelp
	err := fs.Parse(args)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(a.stdout)
		fs.Usage()
		return err
	case err != nil:
		fs.Usage()
		return errFlagParse
	}
	return nil
}

// parse parses args into fs, flags and positional arguments in any order
// ("runs settle --partition eu"), and returns the positional arguments.
// want is how many are required (-1: any number).
func (a *app) parse(fs *flag.FlagSet, args []string, want int) ([]string, error) {
	var pos []string
	for {
		if err := a.parseFlags(fs, args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			pos = append(pos, rest...) // everything after "--" is positional
			break
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
	a.connEnv(fs)
	if err := a.resolveToken(isSet(fs, "token"), isSet(fs, "token-file")); err != nil {
		return nil, err
	}
	if a.conn.timeout <= 0 {
		return nil, a.badUsage(fs, "--timeout %v: want a positive duration", a.conn.timeout)
	}
	if a.conn.output != "table" && a.conn.output != "json" && a.conn.output != "jsonl" {
		return nil, a.badUsage(fs, "-o %q: want table, json or jsonl", a.conn.output)
	}
	if want >= 0 && len(pos) != want {
		return nil, a.badUsage(fs, "want %d argument(s), got %d: %q", want, len(pos), redactArgs(pos))
	}
	return pos, nil
}

// badUsage prints the error (secrets masked) and fs's usage, as the flag
// package does for a bad flag, and returns errFlagParse (exit 2).
func (a *app) badUsage(fs *flag.FlagSet, format string, args ...any) error {
	fmt.Fprintf(a.stderr, "holdfast: %s\n", printable(redactText(fmt.Sprintf(format, args...))))
	fs.Usage()
	return errFlagParse
}

// isSet reports whether the flag name was given.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// withTimeout bounds ctx by --timeout.
func (a *app) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, a.conn.timeout)
}

// isHelp reports whether arg asks for help.
// commandFirst moves connection flags given before the command (holdfast
// --admin URL jobs) after it, where the command's flag set parses them.
// Args that do not start with such flags, or hold no command after them,
// are returned as they are (the usage then says what is wrong).
func commandFirst(args []string) []string {
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") && !isHelp(args[i]) {
		name, _, inline := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
		switch {
		case name == "redis-cluster" || inline:
			i++
		case connValueFlags[name]:
			i += 2
		default:
			return args // not a connection flag
		}
	}
	if i == 0 || i >= len(args) {
		return args
	}
	// The command's words (noun, verb, positional arguments) come first,
	// the flags after them, before any other flag and before "--" (lease
	// run's command line).
	j := i
	for j < len(args) && !strings.HasPrefix(args[j], "-") {
		j++
	}
	out := make([]string, 0, len(args))
	out = append(out, args[i:j]...)
	out = append(out, args[:i]...)
	return append(out, args[j:]...)
}

// connValueFlags are the connection flags that take a value (flagSet).
var connValueFlags = map[string]bool{"redis": true, "pg": true, "admin": true, "token": true, "token-file": true, "o": true, "output": true, "timeout": true}

func isHelp(arg string) bool {
	switch arg {
	case "help", "-h", "-help", "--help":
		return true
	}
	return false
}

// printFlags writes fs's flags as help shows them: one spelling, --name
// (and -o, --output), with the value's name, the usage and the default.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		if f.Name == "o" {
			return // an alias of --output
		}
		spelling := "--" + f.Name
		if f.Name == "output" {
			spelling = "-o, --output"
		}
		value, usage := flag.UnquoteUsage(f)
		if value != "" {
			spelling += " " + value
		}
		switch f.DefValue {
		case "", "false", "0", "0s":
		default:
			usage += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(w, "  %s\n      %s\n", spelling, usage)
	})
}
