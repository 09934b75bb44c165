package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Each shell's script names every noun of the table and each noun's
// verbs (issue 37).
func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out := ok(t, "completion", shell)
		for _, c := range commands() {
			require.Contains(t, out, c.name, shell)
		}
		require.Contains(t, out, "completion", shell)
		require.Contains(t, out, "ls show runs retry trigger backfill pause resume watch", shell)
		require.Contains(t, out, "ls show run", shell)
		require.Contains(t, out, "get reset", shell)
		require.Contains(t, out, "prune", shell)
	}
	require.Contains(t, ok(t, "completion", "bash"), "complete -o default -F _holdfast holdfast")
	require.Contains(t, ok(t, "completion", "bash"), `job) COMPREPLY=($(compgen -W "ls show runs retry trigger backfill pause resume watch" -- "$cur")) ;;`)
	require.Equal(t, len(commands())+2, strings.Count(ok(t, "completion", "fish"), "complete -c holdfast -n __fish_use_subcommand"), "one line a command, completion and help")
	r := cli(t, "completion", "tcsh")
	require.Equal(t, exitUsage, r.code)
}
