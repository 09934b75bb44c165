package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/redislease"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

// yearly is a spec with no slot during a test: the runs come from the
// CLI's trigger and retry only.
const yearly = "0 0 0 1 1 *"

// testToken is the admin handler's Bearer token in these tests.
const testToken = "s3cret"

// service is a running scheduler with its admin handler on httptest, as a
// deployed service would mount it, and the connection flags of the CLI.
type service struct {
	admin, redis []string    // --admin and --token; --redis and --prefix
	release      func()      // lets the "block" job's run finish
	holder       string      // the holder label of the service's lease client
	owners       chan string // the owner of each run of "block" (Run.Owner)
}

// newService starts, on real Redis under a prefix of the test's own:
//   - settle, partitions eu and us, one attempt a slot; the first
//     attempt of an eu slot fails;
//   - block, which runs until release.
func newService(t *testing.T) *service {
	t.Helper()
	rdb := redistest.Real(t)
	prefix := redistest.Prefix(t, rdb)
	leasePrefix, ledgerPrefix := prefix+"lease:", prefix+"ledger:"
	const holder = "replica-cli"
	leases, err := lease.New(rdb, lease.Options{Prefix: leasePrefix, Holder: holder})
	require.NoError(t, err)
	ldg, err := redisledger.New(rdb, redisledger.Options{Prefix: ledgerPrefix})
	require.NoError(t, err)
	s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ldg})
	require.NoError(t, err)
	require.NoError(t, s.Register(scheduler.Job{
		Name: "settle", Spec: yearly, Zone: "Europe/Berlin", Partitions: []string{"eu", "us"}, MaxAttempts: 1,
		Run: func(_ context.Context, r scheduler.Run) error {
			if r.Partition == "eu" && r.Attempt == 1 {
				return errors.New("bank was down")
			}
			return nil
		},
	}))
	unblock := make(chan struct{})
	owners := make(chan string, 16)
	require.NoError(t, s.Register(scheduler.Job{
		Name: "block", Spec: yearly, MaxAttempts: 1,
		Run: func(ctx context.Context, run scheduler.Run) error {
			select {
			case owners <- run.Owner:
			default:
			}
			select {
			case <-unblock:
			case <-ctx.Done():
			}
			return nil
		},
	}))
	inspector, err := redislease.NewBackend(rdb, redislease.Options{Prefix: leasePrefix})
	require.NoError(t, err)
	h, err := schedhttp.New(s, schedhttp.Options{
		Leases: inspector,
		Authorizer: func(r *http.Request, _ schedhttp.Action, _ string) error {
			switch r.Header.Get("Authorization") {
			case "Bearer " + testToken:
			case "Bearer reader":
				return schedhttp.ErrForbidden // known, not allowed
			default:
				return schedhttp.ErrUnauthenticated
			}
			return nil
		},
	})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", h))
	srv := httptest.NewServer(mux)
	require.NoError(t, s.Start(context.Background()))
	var once bool
	release := func() {
		if !once {
			once = true
			close(unblock)
		}
	}
	t.Cleanup(func() {
		release()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Stop(ctx))
		srv.Close()
	})
	return &service{
		admin:   []string{"--admin", srv.URL + "/admin/", "--token", testToken},
		redis:   []string{"--redis", redistest.URL(), "--prefix", leasePrefix},
		release: release,
		holder:  holder,
		owners:  owners,
	}
}

func (s *service) cmd(args ...string) []string { return append(args, s.admin...) }

// runsOf returns the job's runs as -o json reads them.
func (s *service) runsOf(t *testing.T, job string, args ...string) []schedhttp.RunJSON {
	t.Helper()
	var page schedhttp.RunsPage
	okJSON(t, &page, s.cmd(append([]string{"job", "runs", job}, args...)...)...)
	return page.Runs
}

// waitRun waits until the job's newest run of partition has status, and
// returns it.
func (s *service) waitRun(t *testing.T, job, partition, status string) schedhttp.RunJSON {
	t.Helper()
	var got schedhttp.RunJSON
	testwait.Until(t, 10*time.Second, job+"|"+partition+" "+status, func() bool {
		for _, r := range s.runsOf(t, job) {
			if r.Partition == partition {
				got = r
				return r.Status == status
			}
		}
		return false
	})
	return got
}

func TestCommandsAgainstARunningService(t *testing.T) {
	t.Parallel()
	svc := newService(t)

	// backfill of the 2026 new year's slot (00:00 in Berlin), then runs: a
	// failed eu slot and a succeeded us slot.
	newYear := time.Date(2025, 12, 31, 23, 0, 0, 0, time.UTC)
	for _, p := range []string{"eu", "us"} {
		var out schedhttp.SlotsResponse
		okJSON(t, &out, svc.cmd("job", "backfill", "settle", "--partition", p, "--reason", "test",
			"--from", "2025-12-01T00:00:00Z", "--to", "2026-02-01T00:00:00Z")...)
		require.Len(t, out.Slots, 1)
		require.Equal(t, schedhttp.SlotJSON{Job: "settle", Partition: p, Slot: schedhttp.Time{Time: newYear}}, out.Slots[0])
	}
	failed := svc.waitRun(t, "settle", "eu", "failed")
	svc.waitRun(t, "settle", "us", "succeeded")
	require.Equal(t, 1, failed.Attempt)

	// retry of the failed slot: attempt 2, succeeded.
	slot := failed.Slot.UTC().Format(time.RFC3339Nano)
	out := ok(t, svc.cmd("job", "retry", "settle", "--slot", slot, "--partition", "eu")...)
	require.Contains(t, out, "retry asked: 1 slot(s)")
	retried := svc.waitRun(t, "settle", "eu", "succeeded")
	require.Equal(t, 2, retried.Attempt)

	// runs: succeeded slots in both partitions, one table row each.
	out = ok(t, svc.cmd("job", "runs", "settle")...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	require.Equal(t, []string{"PARTITION", "SLOT", "STATUS", "ATTEMPT", "TOKEN", "HOLDER", "OWNER", "ID", "STARTED", "FINISHED", "ERROR", "CLASS"}, strings.Fields(lines[0]))
	var partitions []string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		partitions = append(partitions, f[0])
		require.Equal(t, "succeeded", f[2], l)
	}
	slices.Sort(partitions)
	require.Equal(t, []string{"eu", "us"}, partitions)

	// runs --slot: the eu slot's two attempts, the first failed.
	var run schedhttp.RunJSON
	okJSON(t, &run, svc.cmd("job", "runs", "settle", "--slot", slot, "--partition", "eu")...)
	require.Len(t, run.Attempts, 2)
	require.Equal(t, []string{"failed", "succeeded"}, []string{run.Attempts[0].Status, run.Attempts[1].Status})
	require.NotZero(t, run.Attempts[1].Token)
	out = ok(t, svc.cmd("job", "runs", "settle", "--slot", slot, "--partition", "eu")...)
	require.Contains(t, out, "attempt 2")
	require.Contains(t, out, "bank was down")

	// jobs: both jobs, settle's last success.
	var jobs schedhttp.JobsPage
	okJSON(t, &jobs, svc.cmd("job", "ls")...)
	names := []string{}
	for _, j := range jobs.Jobs {
		names = append(names, j.Name)
		if j.Name == "settle" {
			require.Equal(t, []string{"eu", "us"}, j.Partitions)
			require.Equal(t, "Europe/Berlin", j.Zone)
			require.Equal(t, "succeeded", j.LastStatus)
			require.False(t, j.LastSuccess.IsZero())
		}
	}
	slices.Sort(names)
	require.Equal(t, []string{"block", "settle"}, names)
	out = ok(t, svc.cmd("job", "ls")...)
	require.Regexp(t, `(?m)^settle\s+0 0 0 1 1 \*\s+Europe/Berlin\s+eu,us\s+\S+\s+no\s+succeeded\s+0\s+0\s+\S+Z\s`, out)

	// --all-partitions: the new year's slot again in eu and us, one call.
	var both schedhttp.SlotsResponse
	okJSON(t, &both, svc.cmd("job", "retry", "settle", "--slot", newYear.Format(time.RFC3339), "--all-partitions", "--reason", "all")...)
	require.ElementsMatch(t, []schedhttp.SlotJSON{
		{Job: "settle", Partition: "eu", Slot: schedhttp.Time{Time: newYear}},
		{Job: "settle", Partition: "us", Slot: schedhttp.Time{Time: newYear}},
	}, both.Slots)
	for _, p := range []string{"eu", "us"} {
		svc.waitRun(t, "settle", p, "succeeded")
	}
	out = ok(t, svc.cmd("job", "backfill", "settle", "--all-partitions", "--from", "2025-12-01T00:00:00Z", "--to", "2026-02-01T00:00:00Z", "-o", "jsonl")...)
	lines = strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, "jsonl: one slot a line: %s", out)
	for _, l := range lines {
		var s schedhttp.SlotJSON
		require.NoError(t, json.Unmarshal([]byte(l), &s), l)
		require.Equal(t, newYear, s.Slot.UTC())
	}
	r := cli(t, svc.cmd("job", "retry", "settle", "--slot", newYear.Format(time.RFC3339), "--all-partitions", "--partition", "eu")...)
	require.Equal(t, exitUsage, r.code, r.stderr)
	for _, p := range []string{"eu", "us"} {
		svc.waitRun(t, "settle", p, "succeeded")
	}

	// job watch -o jsonl streams one JSON object a line.
	var stream lockedBuffer
	stop := start(t, &stream, svc.cmd("job", "watch", "settle", "--interval", "10ms", "-o", "jsonl")...)
	testwait.Until(t, 10*time.Second, "watch's first events", func() bool {
		return strings.Count(stream.String(), "\n") >= 2
	})
	wr := stop()
	require.Equal(t, exitOK, wr.code, wr.stderr)
	for _, l := range strings.Split(strings.TrimSpace(wr.stdout), "\n") {
		require.True(t, json.Valid([]byte(l)), "one JSON object a line: %q", l)
	}
	require.Contains(t, wr.stdout, `"status":"succeeded"`)

	// job show: one job, a field a line; an unknown job exits 3.
	out = ok(t, svc.cmd("job", "show", "settle")...)
	require.Regexp(t, `(?m)^last status\s+succeeded$`, out)
	require.Regexp(t, `(?m)^skipped\s+0$`, out)
	var one schedhttp.JobJSON
	okJSON(t, &one, svc.cmd("job", "show", "settle")...)
	require.Equal(t, "settle", one.Name)
	require.Equal(t, exitNotFound, cli(t, svc.cmd("job", "show", "nope")...).code)

	// pause and resume.
	var paused schedhttp.PausedResponse
	okJSON(t, &paused, svc.cmd("job", "pause", "settle")...)
	require.Equal(t, schedhttp.PausedResponse{Job: "settle", Paused: true}, paused)
	require.Contains(t, ok(t, svc.cmd("job", "resume", "settle")...), "job settle paused: no")
	okJSON(t, &paused, svc.cmd("job", "pause", "settle")...)
	require.Contains(t, ok(t, svc.cmd("job", "resume", "settle", "--skip-paused")...), "job settle paused: no")
}

// While a run holds its lease, lease ls shows it with the run's token,
// from Redis and from the admin handler, and fence lease prints that token.
func TestLeaseOfARunningJob(t *testing.T) {
	t.Parallel()
	svc := newService(t)
	ok(t, svc.cmd("job", "trigger", "block")...)
	run := svc.waitRun(t, "block", "", "running")
	token := latest(run).Token
	require.NotZero(t, token)

	for _, conn := range [][]string{svc.redis, svc.admin} {
		var page schedhttp.LeasesPage
		okJSON(t, &page, append([]string{"lease", "ls", "--match", "block"}, conn...)...)
		require.Len(t, page.Leases, 1, conn)
		l := page.Leases[0]
		require.True(t, l.Held)
		require.Equal(t, token, l.Token)
		require.Equal(t, latest(run).OwnerID, l.OwnerID)
		require.Equal(t, svc.holder, l.Holder, "the lease client's label")
		require.Equal(t, svc.holder, latest(run).Holder, "the scheduler's label, its lease client's by default")

		out := ok(t, append([]string{"lease", "ls"}, conn...)...)
		require.Regexp(t, `(?m)^block\s+yes\s+`+svc.holder+`\s+`+l.OwnerID+`\s+\S+\s+`+token.String()+`\s+no$`, out)
		out = ok(t, append([]string{"fence", "get", "lease", "block"}, conn...)...)
		require.Equal(t, []string{"TOKEN", "OWNER", "ID", token.String(), l.OwnerID}, strings.Fields(out))
	}
	// The owner the job function got, which sinks accept with the token,
	// appears in no output of the CLI, table or JSON.
	owner := <-svc.owners
	require.Equal(t, fence.OwnerID(owner), latest(run).OwnerID)
	for _, args := range [][]string{
		svc.cmd("job", "runs", "block"), svc.cmd("job", "runs", "block", "-o", "json"),
		svc.cmd("job", "runs", "block", "--slot", run.Slot.UTC().Format(time.RFC3339Nano)),
		svc.cmd("job", "runs", "block", "--slot", run.Slot.UTC().Format(time.RFC3339Nano), "-o", "json"),
		append([]string{"lease", "ls"}, svc.redis...), append([]string{"lease", "ls", "-o", "json"}, svc.admin...),
		append([]string{"lease", "show", "block"}, svc.admin...), append([]string{"lease", "show", "block", "-o", "json"}, svc.redis...),
		append([]string{"fence", "get", "lease", "block", "-o", "json"}, svc.admin...),
	} {
		out := ok(t, args...)
		require.NotContains(t, out, owner, "%v", args)
		require.Contains(t, out, fence.OwnerID(owner), "%v", args)
	}
	svc.release()
	svc.waitRun(t, "block", "", "succeeded")
}

func TestAdminErrorsExitCodes(t *testing.T) {
	t.Parallel()
	svc := newService(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"UnknownJobRuns", svc.cmd("job", "runs", "nope"), exitNotFound, "404"},
		{"UnknownJobPause", svc.cmd("job", "pause", "nope"), exitNotFound, "404"},
		{"UnknownJobWatch", svc.cmd("job", "watch", "nope", "--interval", "10ms"), exitNotFound, "404"},
		{"WatchRefused", append(svc.cmd("job", "watch", "settle"), "--token", "wrong"), exitRefused, "401"},
		{"UnknownPartition", svc.cmd("job", "trigger", "settle", "--partition", "asia"), exitNotFound, "404"},
		{"NoSuchSlot", svc.cmd("job", "runs", "settle", "--slot", "2020-01-01T00:00:00Z", "--partition", "eu"), exitNotFound, "404"},
		{"SlotNeedsPartition", svc.cmd("job", "runs", "settle", "--slot", "2020-01-01T00:00:00Z"), exitUsage,
			"partition is required for a partitioned job (give --partition P; runs JOB without --slot lists every partition)"},
		{"NotASlot", svc.cmd("job", "retry", "settle", "--slot", "2026-11-29T01:30:00Z", "--partition", "eu"), exitUsage, "400"},
		{"WrongToken", append(svc.cmd("job", "ls"), "--token", "wrong"), exitRefused, "401"},
		{"NoToken", append(svc.cmd("job", "pause", "settle"), "--token", ""), exitRefused, "401"},
		{"Forbidden", append(svc.cmd("job", "pause", "settle"), "--token", "reader"), exitRefused, "403"},
		{"Unreachable", []string{"job", "ls", "--admin", "http://127.0.0.1:1/admin/"}, exitError, "connect"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := cli(t, tc.args...)
			require.Equal(t, tc.code, r.code, "stderr: %s", r.stderr)
			require.Contains(t, r.stderr, tc.want)
			require.Empty(t, r.stdout)
		})
	}
}

// watch prints the runs and claims as they change, until its context
// ends (Ctrl-C), and exits 0.
func TestWatch(t *testing.T) {
	t.Parallel()
	svc := newService(t)
	var out, jsonOut lockedBuffer
	stop := start(t, &out, svc.cmd("job", "watch", "block", "--interval", "20ms")...)
	stopJSON := start(t, &jsonOut, svc.cmd("job", "watch", "block", "--interval", "20ms", "-o", "json")...)
	ok(t, svc.cmd("job", "trigger", "block")...)
	testwait.Until(t, 10*time.Second, "watch shows the running run and its claim", func() bool {
		s := out.String()
		return strings.Contains(s, "running") && strings.Contains(s, "claim  block  held by")
	})
	svc.release()
	testwait.Until(t, 10*time.Second, "watch shows the run succeeded", func() bool {
		return strings.Contains(out.String(), "succeeded")
	})
	r := stop()
	require.Equal(t, exitOK, r.code, r.stderr)
	require.Empty(t, r.stderr)
	require.Regexp(t, `(?m)^\d\d:\d\d:\d\d  run    -  \S+  running  attempt 1  token \d+  holder replica-cli \([0-9a-f]{12}\)`, r.stdout)

	// -o json: one event a line; the run's events end in succeeded.
	testwait.Until(t, 10*time.Second, "the JSON watch shows the run succeeded", func() bool {
		return strings.Contains(jsonOut.String(), `"status":"succeeded"`)
	})
	r = stopJSON()
	require.Equal(t, exitOK, r.code, r.stderr)
	var statuses []string
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev watchEvent
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		require.NoError(t, dec.Decode(&ev), line)
		if ev.Kind == "run" {
			require.Equal(t, "block", ev.Run.Job)
			statuses = append(statuses, ev.Run.Status)
		}
	}
	require.Equal(t, "succeeded", statuses[len(statuses)-1], statuses)
}

// Connection flags may come before the command, as in `holdfast --admin
// URL jobs`; the result is that of the flags after it.
func TestConnectionFlagsBeforeTheCommand(t *testing.T) {
	t.Parallel()
	svc := newService(t)
	var after, before schedhttp.JobsPage
	okJSON(t, &after, svc.cmd("job", "ls")...)
	okJSON(t, &before, append(slices.Clone(svc.admin), "job", "ls")...)
	// RecentSince is the read's second less the window: two reads may
	// fall in two seconds (a make test beside busy loops).
	require.Len(t, before.Jobs, len(after.Jobs))
	for i := range after.Jobs {
		require.WithinDuration(t, after.Jobs[i].RecentSince.Time, before.Jobs[i].RecentSince.Time, 5*time.Second)
		after.Jobs[i].RecentSince, before.Jobs[i].RecentSince = schedhttp.Time{}, schedhttp.Time{}
	}
	require.Equal(t, after, before)
	require.NotEmpty(t, before.Jobs)
	withEquals := append([]string{"--admin=" + svc.admin[1], "-timeout", "5s"}, svc.admin[2:]...)
	out := ok(t, append(withEquals, "job", "ls")...)
	require.Contains(t, out, "settle")

	r := cli(t, "--admin", svc.admin[1], "--bogus", "job", "ls")
	require.Equal(t, exitUsage, r.code, "an unknown flag before the command: %s", r.stderr)
	r = cli(t, "--admin", svc.admin[1])
	require.Equal(t, exitUsage, r.code, "no command: %s", r.stderr)
}

// job trigger on a paused job says the run waits for resume (the API's
// "paused": true); on a running job it says nothing of the kind. (One
// trigger per (job, partition) here: a second in the same second is
// refused as taken.)
func TestTriggerOnAPausedJobSaysTheRunWaits(t *testing.T) {
	t.Parallel()
	svc := newService(t)
	require.NotContains(t, ok(t, svc.cmd("job", "trigger", "settle", "--partition", "eu")...), "paused")

	ok(t, svc.cmd("job", "pause", "settle")...)
	ok(t, svc.cmd("job", "pause", "block")...)
	var out schedhttp.SlotResponse
	okJSON(t, &out, svc.cmd("job", "trigger", "settle", "--partition", "us")...)
	require.True(t, out.Paused, "the answer says the job is paused")
	require.Equal(t, "us", out.Slot.Partition)
	text := ok(t, svc.cmd("job", "trigger", "block")...)
	require.Contains(t, text, "job block is paused: the run waits until it is resumed (holdfast job resume block)")
}

// job retry and job backfill of a paused job say that the runs wait, as
// trigger does (they said nothing: the operator saw "retry asked" and no
// run); of a running job they do not.
func TestRetryAndBackfillOfAPausedJobSayTheRunsWait(t *testing.T) {
	t.Parallel()
	svc := newService(t)
	// settle runs at midnight on 1 January, Berlin: 23:00 UTC the day before.
	require.NotContains(t, ok(t, svc.cmd("job", "retry", "settle", "--partition", "eu", "--slot", "2024-12-31T23:00:00Z")...), "paused")

	ok(t, svc.cmd("job", "pause", "settle")...)
	text := ok(t, svc.cmd("job", "retry", "settle", "--partition", "us", "--slot", "2024-12-31T23:00:00Z")...)
	require.Contains(t, text, "job settle is paused: the run waits until it is resumed (holdfast job resume settle)")
	var one schedhttp.SlotResponse
	okJSON(t, &one, svc.cmd("job", "retry", "settle", "--partition", "eu", "--slot", "2023-12-31T23:00:00Z")...)
	require.True(t, one.Paused)

	text = ok(t, svc.cmd("job", "backfill", "settle", "--all-partitions", "--from", "2022-12-01T00:00:00Z", "--to", "2023-02-01T00:00:00Z")...)
	require.Contains(t, text, "job settle is paused: the runs wait until it is resumed (holdfast job resume settle)")
	var many schedhttp.SlotsResponse
	okJSON(t, &many, svc.cmd("job", "backfill", "settle", "--partition", "eu", "--from", "2020-12-01T00:00:00Z", "--to", "2022-02-01T00:00:00Z")...)
	require.True(t, many.Paused)
	require.Len(t, many.Slots, 2)
}

// Free text from the ledger reaches the terminal as text: an operator's
// reason with a terminal escape, a carriage return, a line feed and a bidi
// override is printed escaped (it was printed raw: it cleared the screen
// and forged a row; a fresh user's trial), and -o json keeps it whole.
func TestRunsPrintControlCharactersEscaped(t *testing.T) {
	t.Parallel()
	svc := newService(t)
	reason := "ok\x1b[2J\x1b[31mFAKE\r\nN  STATUS succeeded\u202etxt.exe"
	ok(t, svc.cmd("job", "retry", "settle", "--partition", "eu", "--slot", "2024-12-31T23:00:00Z", "--reason", reason)...)
	text := ok(t, svc.cmd("job", "runs", "settle", "--partition", "eu", "--slot", "2024-12-31T23:00:00Z")...)
	for _, raw := range []string{"\x1b", "\r", "\u202e", "FAKE\n"} {
		require.NotContains(t, text, raw)
	}
	require.Contains(t, text, `reason: retry: ok\x1b[2J\x1b[31mFAKE\r\nN  STATUS succeeded\u202etxt.exe`+"\n")
	var run schedhttp.RunJSON
	okJSON(t, &run, svc.cmd("job", "runs", "settle", "--partition", "eu", "--slot", "2024-12-31T23:00:00Z", "-o", "json")...)
	require.Equal(t, "retry: "+reason, run.Reason)
}
