package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
)

// leaseRun runs `holdfast lease run` in a goroutine on the test's own
// redis-server; the result arrives on the channel.
func leaseRun(t *testing.T, srv *redisproc.Server, args ...string) <-chan result {
	t.Helper()
	return leaseRunCtx(t.Context(), t, srv, args...)
}

// leaseRunCtx is leaseRun under ctx, whose end is a signal to holdfast.
func leaseRunCtx(ctx context.Context, t *testing.T, srv *redisproc.Server, args ...string) <-chan result {
	t.Helper()
	full := append([]string{"lease", "run"}, args...)
	full = append(full[:3:3], append([]string{"--redis", "redis://" + srv.Addr() + "/0", "--prefix", "t:"}, full[3:]...)...)
	done := make(chan result, 1)
	go func() {
		var out, errOut lockedBuffer
		code := run(ctx, full, &out, &errOut)
		done <- result{code: code, stdout: out.String(), stderr: errOut.String()}
	}()
	return done
}

// script is a shell command that writes its fence environment to
// dir/env, then runs until a signal: on SIGTERM it writes dir/stopped and
// exits 0, unless ignoreTerm, when only SIGKILL ends it.
func script(dir string, ignoreTerm bool) string {
	trap := `trap 'echo term > "$D/stopped"; exit 0' TERM`
	if ignoreTerm {
		trap = `trap 'echo ignored > "$D/stopped"' TERM`
	}
	return `D=` + dir + `; ` + trap + `; ` +
		`echo "$HOLDFAST_LEASE $HOLDFAST_FENCE_SCOPE $HOLDFAST_FENCE_TOKEN $HOLDFAST_HOLDER $HOLDFAST_LEASE_TTL_MS ${#HOLDFAST_FENCE_OWNER}" > "$D/env.tmp"; ` +
		`mv "$D/env.tmp" "$D/env"; while :; do sleep 0.05; done`
}

func waitFile(t *testing.T, path string) string {
	t.Helper()
	var b []byte
	testwait.Until(t, 10*time.Second, path, func() bool {
		var err error
		b, err = os.ReadFile(path)
		return err == nil
	})
	return strings.TrimSpace(string(b))
}

// Issue 37, 2: lease run holds the lease while CMD runs, gives CMD the
// fence, and stops CMD when the lease is lost: here its key is deleted
// (as an eviction or a failover without the key would), the next renewal
// finds the lease not held, CMD gets SIGTERM, holdfast exits 124.
func TestLeaseRunStopsTheCommandOnLeaseLoss(t *testing.T) {
	t.Parallel()
	srv := redisproc.Start(t)
	rdb := srv.Client(t)
	dir := t.TempDir()
	done := leaseRun(t, srv, "export", "--ttl", "3s", "--grace", "5s", "--holder", "ops-box", "--", "sh", "-c", script(dir, false))

	env := strings.Fields(waitFile(t, filepath.Join(dir, "env")))
	require.Len(t, env, 6, env)
	require.Equal(t, []string{"export", "export"}, env[:2], "lease name and fence scope")
	token, err := rdb.Get(t.Context(), "t:{export}:fence").Result()
	require.NoError(t, err)
	require.Equal(t, token, env[2], "the fencing token the lease was issued")
	require.Equal(t, []string{"ops-box", "3000"}, env[3:5])
	require.NotEqual(t, "0", env[5], "the owner is passed (its length shown here, never its value)")
	owner, err := rdb.Get(t.Context(), "t:{export}").Result()
	require.NoError(t, err, "the lease is held while CMD runs")
	require.NotEmpty(t, owner)

	// Another holder is refused meanwhile: 75, its CMD never started.
	other := <-leaseRun(t, srv, "export", "--", "sh", "-c", "echo ran > "+filepath.Join(dir, "other"))
	require.Equal(t, exitLeaseHeld, other.code, other.stderr)
	require.NoFileExists(t, filepath.Join(dir, "other"))

	require.NoError(t, rdb.Del(t.Context(), "t:{export}").Err()) // the lease is lost
	var r result
	select {
	case r = <-done:
	case <-t.Context().Done():
		t.Fatal("lease run did not end after the lease was lost")
	}
	require.Equal(t, exitLeaseLost, r.code, "stderr: %s", r.stderr)
	require.Contains(t, r.stderr, `lease "export" lost`)
	require.Equal(t, "term", waitFile(t, filepath.Join(dir, "stopped")), "CMD got SIGTERM")
	require.NotContains(t, r.stdout+r.stderr, owner, "the owner is never printed")
}

// A CMD that ignores SIGTERM is killed after --grace.
func TestLeaseRunKillsAfterGrace(t *testing.T) {
	t.Parallel()
	srv := redisproc.Start(t)
	rdb := srv.Client(t)
	dir := t.TempDir()
	done := leaseRun(t, srv, "stubborn", "--ttl", "3s", "--grace", "200ms", "--", "sh", "-c", script(dir, true))
	waitFile(t, filepath.Join(dir, "env"))
	require.NoError(t, rdb.Del(t.Context(), "t:{stubborn}").Err())
	r := <-done
	require.Equal(t, exitLeaseLost, r.code, "stderr: %s", r.stderr)
	require.Equal(t, "ignored", waitFile(t, filepath.Join(dir, "stopped")), "SIGTERM came first, and was ignored")
}

// CMD's own exit status passes through; the lease is released when CMD
// ends; a missing CMD is 127; no CMD is a usage error.
func TestLeaseRunExitCodes(t *testing.T) {
	t.Parallel()
	srv := redisproc.Start(t)
	rdb := srv.Client(t)
	r := <-leaseRun(t, srv, "job", "--", "sh", "-c", "exit 3")
	require.Equal(t, 3, r.code, r.stderr)
	require.Empty(t, r.stderr, "CMD's failure is CMD's to report")
	n, err := rdb.Exists(context.Background(), "t:{job}").Result()
	require.NoError(t, err)
	require.Zero(t, n, "released when CMD ended")
	r = <-leaseRun(t, srv, "job", "--", "sh", "-c", "echo hi")
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Equal(t, "hi\n", r.stdout)
	r = <-leaseRun(t, srv, "job", "--", "/nonexistent/cmd")
	require.Equal(t, exitNotFoundCmd, r.code, r.stderr)
	r = <-leaseRun(t, srv, "job")
	require.Equal(t, exitUsage, r.code, r.stderr)
	// A TTL below the 10 ms minimum is bad usage, like --ttl 0 (a fresh
	// user's trial: it exited 1).
	r = <-leaseRun(t, srv, "job", "--ttl", "1ms", "--", "true")
	require.Equal(t, exitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "invalid TTL")

	// Interrupted while it waits for a lease held elsewhere: 130, not
	// 75 "held by another holder" (a fresh user's trial).
	other, err := lease.New(rdb, lease.Options{Prefix: "t:"})
	require.NoError(t, err)
	held, err := other.TryAcquire(t.Context(), "busy", time.Minute)
	require.NoError(t, err)
	defer func() { _ = held.Release(context.Background()) }()
	r = <-leaseRun(t, srv, "busy", "--", "true")
	require.Equal(t, exitLeaseHeld, r.code, "held, no wait: %s", r.stderr)
	ctx, cancel := context.WithCancel(t.Context())
	done := leaseRunCtx(ctx, t, srv, "busy", "--wait", "20s", "--", "true")
	cancel()
	r = <-done
	require.Equal(t, exitInterrupted, r.code, r.stderr)
	require.Contains(t, r.stderr, "interrupted")
}

// lease run reaches the eviction options of lease.New: a Redis that
// refuses CONFIG GET runs with its policy declared, and one that may evict
// runs with --allow-eviction (a fresh user's trial: the error named
// lease.Options.Eviction, which a CLI user could not set).
func TestLeaseRunEvictionOptions(t *testing.T) {
	t.Parallel()
	managed := redisproc.Start(t, "--rename-command", "CONFIG", "")
	r := <-leaseRun(t, managed, "job", "--", "true")
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stderr, "maxmemory-policy unknown")
	r = <-leaseRun(t, managed, "job", "--eviction-policy", "noeviction", "--", "true")
	require.Equal(t, exitOK, r.code, r.stderr)

	evicting := redisproc.Start(t, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")
	r = <-leaseRun(t, evicting, "job", "--", "true")
	require.Equal(t, 1, r.code, r.stderr)
	require.Contains(t, r.stderr, "may evict keys")
	r = <-leaseRun(t, evicting, "job", "--allow-eviction", "--", "true")
	require.Equal(t, exitOK, r.code, r.stderr)
}
