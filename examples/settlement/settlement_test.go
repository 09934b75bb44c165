package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var summaryRE = regexp.MustCompile(`(?m)^summary: slots=(\d+) ran_once=(\d+) duplicates=(\d+) missed=(\d+) stale_rejected=(\d+)$`)

// buildDemo compiles the demo once per test into a temporary directory.
func buildDemo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "settlement")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "%s", out)
	return bin
}

type summary struct{ slots, ranOnce, duplicates, missed, staleRejected int }

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
	return summary{n(1), n(2), n(3), n(4), n(5)}, out, err
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
		require.NoError(t, err, out)
		require.Contains(t, out, "mode: real")
		require.Equal(t, summary{slots: 10, ranOnce: 10, duplicates: 0, missed: 0, staleRejected: 1}, got, out)
		require.Regexp(t, `ledger: slot 3 succeeded, attempt 1 abandoned by r\d, attempt 2 succeeded by r\d`, out)
	})
	t.Run("EmbeddedModeNeedsNoServices", func(t *testing.T) {
		t.Parallel()
		got, out, err := runDemoBinary(t, bin, []string{"REDIS_URL=", "DATABASE_URL="})
		require.NoError(t, err, out)
		require.Contains(t, out, "mode: embedded")
		require.Equal(t, summary{slots: 10, ranOnce: 10, duplicates: 0, missed: 0, staleRejected: 1}, got, out)
	})
	// Five replica processes, 64 one-second slots; the holder of slot 20 is
	// killed mid-run and restarted: the slot is found abandoned and run
	// again as attempt 2, and no slot runs twice or goes missing.
	t.Run("FiveReplicasSixtyFourSlotsWithAKilledHolder", func(t *testing.T) {
		t.Parallel()
		got, out, err := runDemoBinary(t, bin, realEnv(t), "-replicas", "5", "-slots", "64", "-fault", "kill", "-victim", "20")
		require.NoError(t, err, out)
		require.Equal(t, summary{slots: 64, ranOnce: 64, duplicates: 0, missed: 0, staleRejected: 0}, got, out)
		require.Regexp(t, `ledger: slot 20 succeeded, attempt 1 abandoned by r\d, attempt 2 succeeded by r\d`, out)
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
