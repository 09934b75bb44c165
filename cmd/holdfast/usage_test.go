package main

import (
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
		{"NoCommand", nil, "Usage: holdfast COMMAND"},
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
