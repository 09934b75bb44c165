package main

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
)

// versionCommand is `holdfast version` (and `holdfast --version`).
func versionCommand() command {
	c := command{
		name: "version", summary: "print the build's version, VCS revision and Go version (also --version)",
		help: "Prints the module version, the VCS revision, its time and whether the\n" +
			"tree was modified (when the build recorded them), and the Go version.\n\n" +
			"Examples:\n  holdfast version\n  holdfast --version",
	}
	c.run = func(_ context.Context, a *app, args []string) error {
		if _, err := a.parse(a.flagSet(c), args, 0); err != nil {
			return err
		}
		info, ok := debug.ReadBuildInfo()
		fmt.Fprint(a.stdout, versionText(info, ok))
		return nil
	}
	return c
}

// versionText renders the build info: "holdfast VERSION" and, when
// present, "revision R", "time T", "modified true", then "go GOVERSION".
func versionText(info *debug.BuildInfo, ok bool) string {
	if !ok || info == nil {
		return "holdfast (unknown: no build info)\n"
	}
	var b strings.Builder
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	fmt.Fprintf(&b, "holdfast %s\n", v)
	for _, key := range []string{"vcs.revision", "vcs.time", "vcs.modified"} {
		for _, s := range info.Settings {
			if s.Key == key && s.Value != "" {
				fmt.Fprintf(&b, "%s %s\n", strings.TrimPrefix(key, "vcs."), s.Value)
			}
		}
	}
	fmt.Fprintf(&b, "go %s\n", info.GoVersion)
	return b.String()
}
