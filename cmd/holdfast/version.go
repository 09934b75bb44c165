package main

import (
	"context"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
)

// versionCommand is `holdfast version` (and `holdfast --version`).
func versionCommand() command {
	c := command{
		name: "version", summary: "print the build's version, VCS revision and Go version (also --version)",
		help: "Prints the module version, the VCS revision, its time and whether the\n" +
			"tree was modified (when the build recorded them), and the Go version.\n" +
			"With -o json or jsonl, one object: version, revision, time, modified\n" +
			"(the last three left out when the build did not record them) and go.\n\n" +
			"Examples:\n  holdfast version\n  holdfast --version\n  holdfast version -o json",
	}
	c.run = func(_ context.Context, a *app, args []string) error {
		if _, err := a.parse(a.flagSet(c), args, 0); err != nil {
			return err
		}
		info, ok := debug.ReadBuildInfo()
		if a.machine() {
			return a.printJSON(versionOf(info, ok))
		}
		fmt.Fprint(a.stdout, versionText(info, ok))
		return nil
	}
	return c
}

// buildVersion is `holdfast version -o json`: the fields of versionText.
type buildVersion struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified *bool  `json:"modified,omitempty"`
	Go       string `json:"go,omitempty"`
}

// versionOf returns the build info's fields; Version is "(devel)" for a
// build without a module version, "(unknown)" without build info.
func versionOf(info *debug.BuildInfo, ok bool) buildVersion {
	if !ok || info == nil {
		return buildVersion{Version: "(unknown)"}
	}
	v := buildVersion{Version: info.Main.Version, Go: info.GoVersion}
	if v.Version == "" {
		v.Version = "(devel)"
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			if m, err := strconv.ParseBool(s.Value); err == nil {
				v.Modified = &m
			}
		}
	}
	return v
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
