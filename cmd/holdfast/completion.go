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
  holdfast completion zsh > "${fpath[1]}/_holdfast"
  source <(holdfast completion bash)
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

// noun is a command of the table and its verbs (none for version,
// completion and help), as the completion scripts offer them.
type noun struct {
	name  string
	verbs []string
}

// commandNames lists the command table's nouns and their verbs. The
// completion command itself is not in commands() (it would recurse), so
// it is added here.
func commandNames() []noun {
	var out []noun
	for _, c := range commands() {
		n := noun{name: c.name}
		for _, v := range c.verbs {
			n.verbs = append(n.verbs, strings.TrimPrefix(v().name, c.name+" "))
		}
		out = append(out, n)
	}
	return append(out, noun{name: "completion", verbs: []string{"bash", "zsh", "fish"}}, noun{name: "help"})
}

// completionScript renders the script for shell: the nouns as the first
// word, a noun's verbs as the second; ok is false for an unknown shell.
func completionScript(shell string, nouns []noun) (string, bool) {
	var names []string
	for _, n := range nouns {
		names = append(names, n.name)
	}
	words := strings.Join(names, " ")
	var b strings.Builder
	switch shell {
	case "bash":
		b.WriteString("# bash completion for holdfast\n_holdfast() {\n" +
			"  local cur=\"${COMP_WORDS[COMP_CWORD]}\"\n" +
			"  if [ \"$COMP_CWORD\" -eq 1 ]; then\n" +
			"    COMPREPLY=($(compgen -W \"" + words + "\" -- \"$cur\"))\n" +
			"  elif [ \"$COMP_CWORD\" -eq 2 ]; then\n    case \"${COMP_WORDS[1]}\" in\n")
		for _, n := range nouns {
			if len(n.verbs) > 0 {
				fmt.Fprintf(&b, "      %s) COMPREPLY=($(compgen -W \"%s\" -- \"$cur\")) ;;\n", n.name, strings.Join(n.verbs, " "))
			}
		}
		b.WriteString("    esac\n  fi\n}\ncomplete -o default -F _holdfast holdfast\n")
	case "zsh":
		b.WriteString("#compdef holdfast\n_holdfast() {\n  local -a cmds\n  if (( CURRENT == 2 )); then\n" +
			"    cmds=(" + words + ")\n    compadd -a cmds\n  elif (( CURRENT == 3 )); then\n    case $words[2] in\n")
		for _, n := range nouns {
			if len(n.verbs) > 0 {
				fmt.Fprintf(&b, "      %s) cmds=(%s) ;;\n", n.name, strings.Join(n.verbs, " "))
			}
		}
		b.WriteString("    esac\n    compadd -a cmds\n  else\n    _files\n  fi\n}\ncompdef _holdfast holdfast\n")
	case "fish":
		b.WriteString("# fish completion for holdfast\n")
		for _, n := range nouns {
			fmt.Fprintf(&b, "complete -c holdfast -n __fish_use_subcommand -f -a %s\n", n.name)
		}
		for _, n := range nouns {
			if len(n.verbs) > 0 {
				fmt.Fprintf(&b, "complete -c holdfast -n '__fish_seen_subcommand_from %s' -f -a '%s'\n", n.name, strings.Join(n.verbs, " "))
			}
		}
	default:
		return "", false
	}
	return b.String(), true
}
