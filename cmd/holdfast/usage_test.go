package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

func TestUsageErrorsExit2WithUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string // in stderr
	}{
		{"NoCommand", nil, "Usage: holdfast NOUN VERB"},
		{"UnknownCommand", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"UnknownFlag", []string{"lease", "ls", "--bogus"}, "flag provided but not defined: -bogus"},
		{"MissingArgument", []string{"job", "runs", "--admin", "http://127.0.0.1:1/"}, "want 1 argument(s), got 0"},
		{"ExtraArgument", []string{"job", "ls", "extra"}, "want 0 argument(s), got 1"},
		{"BadOutput", []string{"job", "ls", "-o", "xml"}, `-o "xml": want table, json or jsonl`},
		{"NoSubcommand", []string{"fence"}, "want a subcommand"},
		{"NoAdmin", []string{"job", "ls", "--admin", ""}, "needs the admin handler"},
		{"BadSlot", []string{"job", "retry", "settle", "--slot", "yesterday", "--admin", "http://127.0.0.1:1/"}, "want an RFC 3339 time"},
		{"PruneNeedsCutoff", []string{"ledger", "prune", "--redis", "redis://127.0.0.1:1"}, "--before is required"},
		{"PruneNeedsOneLedger", []string{"ledger", "prune", "--before", "1h", "--redis", "", "--pg", ""}, "give the ledger"},
		{"BadLeaseName", []string{"lease", "show", "a{b}", "--redis", "redis://127.0.0.1:6379/0"}, "invalid lease name"},
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
// and the exit codes, on stdout, with exit 0; a verb's flags are spelled
// --flag (and -o, --output), one spelling (issue 37).
func TestHelpOnEveryCommand(t *testing.T) {
	t.Parallel()
	for _, n := range helpCommands() {
		r := cli(t, append(n.words, "--help")...)
		require.Equal(t, exitOK, r.code, "%v: %s", n.words, r.stderr)
		require.Contains(t, r.stdout, "Exit codes:", n.words)
		if !n.group {
			require.Contains(t, r.stdout, "Examples:\n  holdfast "+strings.Join(n.words[:min(2, len(n.words))], " "), n.words)
			require.Contains(t, r.stdout, "-o, --output format", n.words)
			require.Regexp(t, `(?m)^  --timeout duration$`, r.stdout, n.words)
			require.NotRegexp(t, `(?m)^  -[a-np-z]`, r.stdout, "one spelling: --flag: %v", n.words)
		}
	}
	r := cli(t, "help")
	require.Equal(t, exitOK, r.code)
	require.Contains(t, r.stdout, "4  refused or forbidden")
}

// helpCommand is a command as its words, and whether it is a group of
// verbs (its help lists them).
type helpCommand struct {
	words []string
	group bool
}

// helpCommands is every noun, verb and sub-verb of the table.
func helpCommands() []helpCommand {
	var out []helpCommand
	for _, c := range commands() {
		out = append(out, helpCommand{words: []string{c.name}, group: len(c.verbs) > 0})
		for _, v := range c.verbs {
			sub := v()
			out = append(out, helpCommand{words: strings.Fields(sub.name), group: sub.name == "fence get" || sub.name == "fence reset"})
		}
	}
	for _, sub := range []command{fenceLeaseCommand(), fencePGCommand(), fenceRedisCommand(),
		fenceResetStoreCommand("pg"), fenceResetStoreCommand("redis"), completionCommand()} {
		out = append(out, helpCommand{words: strings.Fields(sub.name)})
	}
	return out
}

// helpNames is every command and subcommand, as argument lists.
func helpNames() [][]string {
	var names [][]string
	for _, n := range helpCommands() {
		names = append(names, n.words)
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
	r := cli(t, "job", "ls", "--bogus")
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
		if strings.Contains(r.stdout, "Flags:") {
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
		r := cli(t, "job", "ls", "--admin", "http://127.0.0.1:1/", "--timeout", v)
		require.Equal(t, exitUsage, r.code, "%s: %s", v, r.stderr)
		require.Contains(t, r.stderr, "want a positive duration")
		require.NotContains(t, r.stderr, "deadline")
	}
}

// The leases commands' help says which source wins.
func TestLeasesHelpSaysSourcePrecedence(t *testing.T) {
	t.Parallel()
	for _, name := range [][]string{{"lease"}, {"lease", "ls"}, {"lease", "show"}} {
		out := ok(t, append(name, "--help")...)
		require.Contains(t, out, "with both set, Redis wins", name)
	}
}

// A slot at the year 1's first second (0001-01-01T00:00:00Z, the zero
// time, a slot of a schedule like any other) is printed, not left blank
// as an unset time is (a fresh user's trial: "SLOT -" could not be told
// apart or addressed).
func TestSlotOfTheYearOneIsPrinted(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	a := &app{stdout: &out, stderr: io.Discard}
	slots := []schedhttp.SlotJSON{{Job: "settle", Partition: "eu", Slot: schedhttp.Time{}}}
	require.NoError(t, a.printSlots("retry asked", schedhttp.SlotResponse{Slot: slots[0]}, slots))
	require.Contains(t, out.String(), "settle  eu         0001-01-01T00:00:00Z")
	require.Equal(t, "", fmtTime(schedhttp.Time{}), "an unset time stays blank")
}
