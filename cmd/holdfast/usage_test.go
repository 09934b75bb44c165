package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUsageErrorsExit2WithUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"NoCommand", nil, "Usage: holdfast [connection flags] COMMAND"},
		{"UnknownCommand", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"UnknownFlag", []string{"leases", "ls", "--bogus"}, "flag provided but not defined: -bogus"},
		{"MissingArgument", []string{"runs", "--admin", "http://127.0.0.1:1/"}, "want 1 argument(s), got 0"},
		{"ExtraArgument", []string{"jobs", "extra"}, "want 0 argument(s), got 1"},
		{"BadOutput", []string{"jobs", "-o", "xml"}, `-o "xml": want table or json`},
		{"NoSubcommand", []string{"fence"}, "want a subcommand"},
		{"NoAdmin", []string{"jobs", "--admin", ""}, "needs the admin handler"},
		{"BadSlot", []string{"retry", "settle", "--slot", "yesterday", "--admin", "http://127.0.0.1:1/"}, "want an RFC 3339 time"},
		{"PruneNeedsCutoff", []string{"prune", "--redis", "redis://127.0.0.1:1"}, "--before is required"},
		{"PruneNeedsOneLedger", []string{"prune", "--before", "1h", "--redis", "", "--pg", ""}, "give the ledger"},
		{"BadLeaseName", []string{"leases", "show", "a{b}", "--redis", "redis://127.0.0.1:6379/0"}, "invalid lease name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := cli(t, tc.args...)
			require.Equal(t, exitUsage, r.code, "stderr: %s", r.stderr)
			require.Contains(t, r.stderr, tc.want)
			require.Empty(t, r.stdout)
		})
	}
}

// Every command and subcommand answers --help with its usage, examples
// and the exit codes, on stdout, with exit 0.
func TestHelpOnEveryCommand(t *testing.T) {
	t.Parallel()
	var names [][]string
	for _, c := range commands() {
		names = append(names, []string{c.name})
	}
	for _, sub := range []command{leasesLsCommand(), leasesShowCommand(), fenceLeaseCommand(), fencePGCommand(), fenceRedisCommand()} {
		names = append(names, strings.Fields(sub.name))
	}
	for _, name := range names {
		r := cli(t, append(name, "--help")...)
		require.Equal(t, exitOK, r.code, "%v: %s", name, r.stderr)
		require.Contains(t, r.stdout, "Exit codes:", name)
		if len(name) == 2 || (name[0] != "leases" && name[0] != "fence") {
			require.Contains(t, r.stdout, "Examples:\n  holdfast "+name[0], name)
			require.Contains(t, r.stdout, "-o format", name)
		}
	}
	r := cli(t, "help")
	require.Equal(t, exitOK, r.code)
	require.Contains(t, r.stdout, "4  refused or forbidden")
}

// helpNames is every command and subcommand, as argument lists.
func helpNames() [][]string {
	var names [][]string
	for _, c := range commands() {
		names = append(names, []string{c.name})
	}
	for _, sub := range []command{leasesLsCommand(), leasesShowCommand(), fenceLeaseCommand(), fencePGCommand(), fenceRedisCommand()} {
		names = append(names, strings.Fields(sub.name))
	}
	return names
}

// cliEnv runs the command as cli does, with env as its environment.
func cliEnv(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	a := &app{stdout: &out, stderr: &errOut, getenv: func(k string) string { return env[k] }}
	code := a.main(t.Context(), args)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// --help prints the usage once, on stdout; a bad flag once, on stderr.
func TestUsagePrintedOnce(t *testing.T) {
	t.Parallel()
	for _, name := range helpNames() {
		r := cli(t, append(name, "--help")...)
		require.Equal(t, 1, strings.Count(r.stdout+r.stderr, "Usage:"), "%v:\nstdout: %s\nstderr: %s", name, r.stdout, r.stderr)
		require.Empty(t, r.stderr, name)
	}
	r := cli(t, "jobs", "--bogus")
	require.Equal(t, exitUsage, r.code)
	require.Equal(t, 1, strings.Count(r.stderr, "Usage:"), r.stderr)
	require.Contains(t, r.stderr, "flag provided but not defined: -bogus")
}

// The connection flags' defaults come from the environment after parsing:
// no help shows a value of it, only the variable's name.
func TestHelpShowsNoEnvironmentValue(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"HOLDFAST_TOKEN": "marker-token-8c83b", "DATABASE_URL": "postgres://user:marker-pass@db/x",
		"REDIS_URL": "redis://:marker-redis@r:6379/0", "HOLDFAST_ADMIN": "http://marker-admin/",
	}
	for _, name := range append(helpNames(), []string{"help"}) {
		r := cliEnv(t, env, append(name, "--help")...)
		require.Equal(t, exitOK, r.code, "%v: %s", name, r.stderr)
		require.NotContains(t, r.stdout+r.stderr, "marker", name)
		if len(name) == 2 || (name[0] != "leases" && name[0] != "fence" && name[0] != "help") {
			require.Contains(t, r.stdout, "(default $HOLDFAST_TOKEN)", name)
		}
	}
	// The environment still applies when the flag is absent...
	var a app
	a.getenv = func(k string) string { return env[k] }
	fs := a.flagSet(command{name: "x"})
	_, err := a.parse(fs, []string{"--pg", "postgres://flag/y"}, 0)
	require.NoError(t, err)
	require.Equal(t, env["HOLDFAST_TOKEN"], a.conn.token)
	require.Equal(t, env["REDIS_URL"], a.conn.redis)
	// ...and a flag given, even empty, wins.
	require.Equal(t, "postgres://flag/y", a.conn.pg)
	a = app{getenv: a.getenv, stdout: io.Discard, stderr: io.Discard}
	_, err = a.parse(a.flagSet(command{name: "x"}), []string{"--admin", ""}, 0)
	require.NoError(t, err)
	require.Empty(t, a.conn.admin)
}

func TestTimeoutMustBePositive(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"0s", "-1s"} {
		r := cli(t, "jobs", "--admin", "http://127.0.0.1:1/", "--timeout", v)
		require.Equal(t, exitUsage, r.code, "%s: %s", v, r.stderr)
		require.Contains(t, r.stderr, "want a positive duration")
		require.NotContains(t, r.stderr, "deadline")
	}
}

// The leases commands' help says which source wins.
func TestLeasesHelpSaysSourcePrecedence(t *testing.T) {
	t.Parallel()
	for _, name := range [][]string{{"leases"}, {"leases", "ls"}, {"leases", "show"}} {
		out := ok(t, append(name, "--help")...)
		require.Contains(t, out, "with both set, Redis wins", name)
	}
}
