package main

import (
	"bytes"
	"context"
	"encoding/json"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestVersionText(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.24.1", Main: debug.Module{Version: "v0.3.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.modified", Value: "true"}, {Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-12-04T20:00:00Z"}, {Key: "GOOS", Value: "linux"},
	}}
	require.Equal(t, "holdfast v0.3.0\nrevision abc123\ntime 2026-12-04T20:00:00Z\nmodified true\ngo go1.24.1\n", versionText(info, true))
	require.Equal(t, "holdfast (devel)\ngo go1.24.1\n", versionText(&debug.BuildInfo{GoVersion: "go1.24.1"}, true))
	require.Equal(t, "holdfast (unknown: no build info)\n", versionText(nil, false))

	modified := true
	require.Equal(t, buildVersion{Version: "v0.3.0", Revision: "abc123", Time: "2026-12-04T20:00:00Z", Modified: &modified, Go: "go1.24.1"}, versionOf(info, true))
	require.Equal(t, buildVersion{Version: "(devel)", Go: "go1.24.1"}, versionOf(&debug.BuildInfo{GoVersion: "go1.24.1"}, true))
	require.Equal(t, buildVersion{Version: "(unknown)"}, versionOf(nil, false))
}

// version honours -o json and jsonl, as every command does: one object.
func TestVersionJSON(t *testing.T) {
	info, ok := debug.ReadBuildInfo()
	for _, o := range []string{"json", "jsonl"} {
		var out, errOut bytes.Buffer
		args := []string{"version", "-o", o}
		if o == "jsonl" {
			args[0] = "--version" // the flag form takes -o as well
		}
		code := run(context.Background(), args, &out, &errOut)
		require.Equal(t, exitOK, code, "%s: %s", o, errOut.String())
		var got buildVersion
		require.NoError(t, json.Unmarshal(out.Bytes(), &got), "-o %s: %q", o, out.String())
		require.Equal(t, versionOf(info, ok), got, "-o %s", o)
		require.NotEmpty(t, got.Go, "-o %s", o)
		if o == "jsonl" {
			require.Equal(t, 1, bytes.Count(out.Bytes(), []byte("\n")), "-o jsonl: one line")
		}
	}
}

func TestVersionCommandAndFlag(t *testing.T) {
	info, ok := debug.ReadBuildInfo()
	want := versionText(info, ok)
	for _, args := range [][]string{{"version"}, {"--version"}} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), args, &out, &errOut)
		require.Equal(t, exitOK, code, "%v: %s", args, errOut.String())
		require.Equal(t, want, out.String(), "%v", args)
		require.Contains(t, out.String(), "go go1.")
	}
	for _, args := range [][]string{{"version", "extra"}, {"--version", "extra"}, {"--version", "--bogus"}} {
		var out, errOut bytes.Buffer
		require.Equal(t, exitUsage, run(context.Background(), args, &out, &errOut), "%v", args)
	}
}
