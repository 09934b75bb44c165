package main

import (
	"context"
	"fmt"
	"strings"
)

// completionCommand is `holdfast completion bash|zsh|fish`: a completion
// script of the command names, generated from the command table.
func completionCommand() command {
	c := command{
		name: "completion", args: "bash|zsh|fish", summary: "print a shell completion script",
		help: `Prints a completion script of holdfast's commands for the shell.

Examples:
  source <(holdfast completion bash)
  holdfast completion zsh > "${fpath[1]}/_holdfast"
  holdfast completion fish > ~/.config/fish/completions/holdfast.fish`,
	}
	c.run = func(_ context.Context, a *app, args []string) error {
		fs := a.flagSet(c)
		pos, err := a.parse(fs, args, 1)
		if err != nil {
			return err
		}
		script, ok := completionScript(pos[0], commandNames())
		if !ok {
			return a.badUsage(fs, "shell %q: want bash, zsh or fish", pos[0])
		}
		fmt.Fprint(a.stdout, script)
		return nil
	}
	return c
}

// commandNames lists the command table's names. The completion command
// itself is not in commands() (it would recurse), so it is added here.
func commandNames() []string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return append(names, "completion", "help")
}

// completionScript renders the script for shell; ok is false for an
// unknown shell.
func completionScript(shell string, names []string) (string, bool) {
	words := strings.Join(names, " ")
	switch shell {
	case "bash":
		return "# bash completion for holdfast\n_holdfast() {\n" +
			"  if [ \"$COMP_CWORD\" -eq 1 ]; then\n" +
			"    COMPREPLY=($(compgen -W \"" + words + "\" -- \"${COMP_WORDS[1]}\"))\n" +
			"  fi\n}\ncomplete -o default -F _holdfast holdfast\n", true
	case "zsh":
		return "#compdef holdfast\n_holdfast() {\n  local -a cmds\n  cmds=(" + words + ")\n" +
			"  if (( CURRENT == 2 )); then\n    compadd -a cmds\n  else\n    _files\n  fi\n}\ncompdef _holdfast holdfast\n", true
	case "fish":
		var b strings.Builder
		b.WriteString("# fish completion for holdfast\n")
		for _, n := range names {
			fmt.Fprintf(&b, "complete -c holdfast -n __fish_use_subcommand -f -a %s\n", n)
		}
		return b.String(), true
	}
	return "", false
}
