package main

import (
	"bytes"
	"context"
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
	var out, errOut bytes.Buffer
	require.Equal(t, exitUsage, run(context.Background(), []string{"version", "extra"}, &out, &errOut))
}
