package redisproc_test

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redisproc"
)

// TestKilledServersPortIsNotHandedOut: while a Server is killed, its port
// is free as the kernel sees it, but still its own: its clients dial it,
// and another Server started there would answer them (a CI failure: a
// quorum test's killed master answered as up, through another test's
// server). Control: with claimPort always granting, the killed Server's
// port comes first and is handed out.
func TestKilledServersPortIsNotHandedOut(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no flock")
	}
	t.Parallel()
	srv := redisproc.Start(t)
	srv.Kill(t)
	// A second candidate that is free and unclaimed.
	spare := redisproc.Start(t)
	sparePort := spare.Port()
	spare.Close()

	calls := 0
	port, release, err := redisproc.FreePortOf(func() int {
		calls++
		if calls%2 == 1 {
			return srv.Port()
		}
		return sparePort
	})
	require.NoError(t, err)
	defer release()
	require.Equal(t, sparePort, port, "the killed Server's port %d was handed out", srv.Port())
	require.GreaterOrEqual(t, calls, 2, "the killed Server's port was offered first")

	// Restart takes the port again: the claim was kept for it.
	srv.Restart(t)
	requirePing(t, srv.Addr())
}

// TestPortClaimsHoldAcrossProcesses: go test runs packages' test binaries
// side by side, so a claim must hold against another process (the test
// binary run again as a child that tries to claim the port), from a
// Server's start to its end, and no longer.
func TestPortClaimsHoldAcrossProcesses(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no flock")
	}
	t.Parallel()
	srv := redisproc.Start(t)
	child := func() string {
		t.Helper()
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envClaim+"="+strconv.Itoa(srv.Port()))
		out, err := cmd.Output()
		require.NoError(t, err, "child: %s", out)
		return string(out)
	}
	require.Equal(t, "held", child(), "a running Server's port")
	srv.Kill(t)
	require.Equal(t, "held", child(), "a killed Server's port")
	srv.Close()
	require.Equal(t, "claimed", child(), "the port of a Server that ended")
}
