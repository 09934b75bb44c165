package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Each shell's script names every command of the table (issue 37).
func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out := ok(t, "completion", shell)
		for _, c := range commands() {
			require.Contains(t, out, c.name, shell)
		}
		require.Contains(t, out, "completion", shell)
	}
	require.Contains(t, ok(t, "completion", "bash"), "complete -o default -F _holdfast holdfast")
	require.Equal(t, len(commands())+2, strings.Count(ok(t, "completion", "fish"), "complete -c holdfast "), "one line a command, completion and help")
	r := cli(t, "completion", "tcsh")
	require.Equal(t, exitUsage, r.code)
}
