package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var summaryRE = regexp.MustCompile(`(?m)^summary: slots=(\d+) ran_once=(\d+) skipped=(\d+) duplicates=(\d+) missed=(\d+) stale_rejected=(\d+)$`)

// buildDemo compiles the demo once per test into a temporary directory.
func buildDemo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "settlement")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

type summary struct{ slots, ranOnce, skipped, duplicates, missed, staleRejected int }

// requireEverySlotOnce checks the promise: no slot ran twice or went
// missing. A slot may be skipped by the job's overlap policy (the default
// skips a slot that comes due while a run is in progress, as when a
// takeover catches up on the slots of a frozen holder and, on a busy
// machine, is still at it when the next one fires); the ledger records it,
// and the demo prints why.
func requireEverySlotOnce(t *testing.T, got summary, slots int, out string) {
	t.Helper()
	require.Equal(t, slots, got.slots, out)
	require.Zero(t, got.duplicates, out)
	require.Zero(t, got.missed, out)
	require.Equal(t, slots, got.ranOnce+got.skipped, out)
	require.Equal(t, got.skipped, strings.Count(out, "skipped by policy, reason overlap"), out)
}

// requireFrozenHolderRejected checks a run of the default scenario (10
// slots, the holder of slot 3, or of the first run after it on a busy host that
// skipped slot 3, frozen past its TTL) in mode: it ended
// cleanly, every slot ran once, the frozen holder's late write was
// rejected, and the ledger shows the takeover of that slot.
func requireFrozenHolderRejected(t *testing.T, mode string, got summary, out string, err error) {
	t.Helper()
	require.NoError(t, err, out)
	require.Contains(t, out, "mode: "+mode)
	requireEverySlotOnce(t, got, 10, out)
	require.Equal(t, 1, got.staleRejected, out)
	require.Regexp(t, `ledger: slot \d+ succeeded, attempt 1 abandoned by r\d, attempt 2 succeeded by r\d`, out)
}

// runDemoBinary runs the demo with env and returns its summary line's
// figures and its whole output.
func runDemoBinary(t *testing.T, bin string, env []string, args ...string) (summary, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	outBytes, err := cmd.CombinedOutput()
	out := string(outBytes)
	m := summaryRE.FindStringSubmatch(out)
	require.NotNil(t, m, "no summary line in:\n%s", out)
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	return summary{n(1), n(2), n(3), n(4), n(5), n(6)}, out, err
}

func realEnv(t *testing.T) []string {
	t.Helper()
	redistest.Real(t) // fails (or skips with HOLDFAST_SKIP_INTEGRATION=1) without Redis
	pgtest.Require(t)
	return []string{"REDIS_URL=" + redistest.URL(), "DATABASE_URL=" + pgtest.URL()}
}

func TestDemo(t *testing.T) {
	t.Parallel()
	bin := buildDemo(t)
	t.Run("RealServicesRunEverySlotOnceAndRejectTheFrozenHolder", func(t *testing.T) {
		t.Parallel()
		got, out, err := runDemoBinary(t, bin, realEnv(t))
		requireFrozenHolderRejected(t, "real", got, out, err)
	})
	// Leases (lease/pglease), ledger (scheduler/ledger/pgledger) and sink
	// (sinks/pgfence) on PostgreSQL alone: REDIS_URL points nowhere, so a
	// Redis call anywhere would fail the run.
	t.Run("PostgresAloneRunsEverySlotOnceAndRejectsTheFrozenHolder", func(t *testing.T) {
		t.Parallel()
		pgtest.Require(t)
		got, out, err := runDemoBinary(t, bin, []string{"REDIS_URL=redis://127.0.0.1:1/0", "DATABASE_URL=" + pgtest.URL()}, "-backend", "postgres")
		requireFrozenHolderRejected(t, "postgres alone", got, out, err)
	})
	t.Run("EmbeddedModeNeedsNoServices", func(t *testing.T) {
		t.Parallel()
		got, out, err := runDemoBinary(t, bin, []string{"REDIS_URL=", "DATABASE_URL="})
		requireFrozenHolderRejected(t, "embedded", got, out, err)
	})
	// Five replica processes, 64 one-second slots; the holder of slot 20 is
	// killed mid-run and restarted: the slot is found abandoned and run
	// again as attempt 2, and no slot runs twice or goes missing.
	t.Run("FiveReplicasSixtyFourSlotsWithAKilledHolder", func(t *testing.T) {
		t.Parallel()
		got, out, err := runDemoBinary(t, bin, realEnv(t), "-replicas", "5", "-slots", "64", "-fault", "kill", "-victim", "20")
		require.NoError(t, err, out)
		requireEverySlotOnce(t, got, 64, out)
		require.Zero(t, got.staleRejected, out)
		require.Regexp(t, `ledger: slot \d+ succeeded, attempt 1 abandoned by r\d, attempt 2 succeeded by r\d`, out)
	})
	// A demo that cannot finish in time ends with the summary of what the
	// sink holds and a clear failure, never a hang: here the bound (1 s)
	// passes before the first slot (3 s after the start).
	t.Run("BoundEndsWithTheSummaryAndTheReason", func(t *testing.T) {
		t.Parallel()
		got, out, err := runDemoBinary(t, bin, []string{"REDIS_URL=", "DATABASE_URL="}, "-limit", "1s")
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, out)
		require.Equal(t, 1, exit.ExitCode(), out)
		require.Equal(t, summary{slots: 10, ranOnce: 0, skipped: 0, duplicates: 0, missed: 10, staleRejected: 0}, got, out)
		require.Contains(t, out, "FAILED: demo did not finish within 1s: the victim slot never ran; slots with no accepted write: [1 2 3 4 5 6 7 8 9 10]", out)
	})
	// -console: after the summary the demo serves the admin console on
	// loopback with a printed token, its leases view on the demo's lease
	// backend, until interrupted; then it exits 0.
	t.Run("ConsoleServesUntilInterrupted", func(t *testing.T) {
		t.Parallel()
		testConsole(t, bin)
	})
	// Negative control: with the sink's token check removed, the frozen
	// holder's late write lands and the tally shows the duplicate.
	t.Run("UnfencedSinkShowsTheDuplicate", func(t *testing.T) {
		t.Parallel()
		got, out, err := runDemoBinary(t, bin, realEnv(t), "-unfenced")
		require.NoError(t, err, out)
		require.Equal(t, 0, got.staleRejected, out)
		require.GreaterOrEqual(t, got.duplicates, 1, out)
		require.Equal(t, 0, got.missed, out)
	})
}

func testConsole(t *testing.T, bin string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-console")
	cmd.Env = append(os.Environ(), "REDIS_URL=", "DATABASE_URL=")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := make(chan string, 1024)
	go func() { // ends when the process closes its stdout
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	// One link, signed in: the token in the fragment (never sent to the server).
	consoleRE := regexp.MustCompile(`^console: (http://127\.0\.0\.1:\d+/)#token=([0-9a-f]{16}) \(signed in; the token stays in the browser tab; Ctrl-C to stop\)$`)
	var url, token string
	var out strings.Builder
	for url == "" {
		select {
		case line, ok := <-lines:
			require.True(t, ok, "the demo ended before serving the console:\n%s", out.String())
			out.WriteString(line + "\n")
			if m := consoleRE.FindStringSubmatch(line); m != nil {
				url, token = m[1], m[2]
			}
		case <-ctx.Done():
			t.Fatalf("no console line within the bound:\n%s", out.String())
		}
	}
	require.Regexp(t, summaryRE, out.String(), "the summary comes first")
	get := func(path, auth string) (int, string) {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, "GET", url+path, nil)
		require.NoError(t, err)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		res, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(b)
	}
	code, body := get("", "")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, "holdfast console")
	code, _ = get("jobs", "")
	require.Equal(t, http.StatusUnauthorized, code, "the API wants the printed token")
	code, body = get("jobs", token)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `"name":"daily-settlement"`)
	require.Contains(t, body, `"last_status":"succeeded"`)
	code, body = get("leases", token)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `"name":"daily-settlement"`)

	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	for range lines { // drain until the process closes its stdout
	}
	require.NoError(t, cmd.Wait(), "Ctrl-C ends the demo cleanly")
}
