package browsertest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/leasejoin"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

// chromium is Debian's build (scripts/services.sh installs it).
const chromium = "/usr/bin/chromium"

const token = "console-test-token"

// console is a live scheduler on the real Redis serving its admin
// handler under /admin/: the job "settle" fires every second in the
// partitions "good" (always succeeds), "bad" (its first attempt of every
// slot fails permanently; an operator's retry succeeds) and "stuck",
// whose lease another owner holds (returned), so none of its slots run.
func console(t *testing.T) (url string, sched *scheduler.Scheduler, stuck *lease.Lease) {
	t.Helper()
	rdb := redistest.Real(t)
	prefix := redistest.Prefix(t, rdb)
	leases, err := lease.New(rdb, lease.Options{Prefix: prefix + "lease:"})
	require.NoError(t, err)
	ldg, err := redisledger.New(rdb, redisledger.Options{Prefix: prefix + "ledger:"})
	require.NoError(t, err)
	other, err := lease.New(rdb, lease.Options{Prefix: prefix + "lease:", Holder: "replica-other"})
	require.NoError(t, err)
	stuck, err = other.TryAcquire(context.Background(), ledger.UnitScope("settle", "stuck"), time.Minute)
	require.NoError(t, err)
	t.Cleanup(func() { _ = stuck.Release(context.Background()) })
	sched, err = scheduler.New(scheduler.Options{Leases: leases, Ledger: ldg})
	require.NoError(t, err)
	require.NoError(t, sched.Register(scheduler.Job{
		Name: "settle", Spec: "* * * * * *", Partitions: []string{"good", "bad", "stuck"}, MaxAttempts: 1,
		Run: func(_ context.Context, run scheduler.Run) error {
			if run.Slot.Partition == "bad" && run.Attempt == 1 {
				return scheduler.Permanent(errors.New("bank refused the batch"))
			}
			return nil
		},
	}))
	// "closed": a job whose window ended an hour ago (the console says
	// "ended").
	require.NoError(t, sched.Register(scheduler.Job{Name: "closed", Spec: "0 * * * *", EndAt: time.Now().Add(-time.Hour),
		Run: func(context.Context, scheduler.Run) error { return nil }}))
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, sched.Start(ctx))
	t.Cleanup(func() {
		stop, done := context.WithTimeout(context.Background(), 10*time.Second)
		defer done()
		require.NoError(t, sched.Stop(stop))
		cancel()
	})
	inspector, ok := leasejoin.Backend(leases).(leasedriver.Inspector)
	require.True(t, ok, "redislease.Backend is an Inspector")
	admin, err := schedhttp.New(sched, schedhttp.Options{Leases: inspector,
		Authorizer: func(r *http.Request, _ schedhttp.Action, _ string) error {
			if r.Header.Get("Authorization") != "Bearer "+token {
				return schedhttp.ErrForbidden
			}
			return nil
		}})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/admin/", http.StripPrefix("/admin", admin))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + "/admin/", sched, stuck
}

// browser starts a headless Chromium (flags fit for root in a container)
// with a fresh profile; the context ends it.
func browser(t *testing.T) (context.Context, context.CancelFunc) {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("HOLDFAST_SKIP_INTEGRATION") == "1" {
			t.Skip("HOLDFAST_SKIP_INTEGRATION=1 and no " + chromium)
		}
		t.Fatalf("no %s (run scripts/services.sh): %v", chromium, err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	}
	deadline, cancelDeadline := context.WithTimeout(context.Background(), 90*time.Second)
	alloc, cancelAlloc := chromedp.NewExecAllocator(deadline, opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	return ctx, func() { cancelCtx(); cancelAlloc(); cancelDeadline() }
}

func TestConsoleShowsTheGridAndRetriesAFailedSlot(t *testing.T) {
	url, sched, stuck := console(t)
	// Wait for some slots of both partitions, failures among them (ten:
	// the screenshots show a grid and a chart with something to see).
	testwait.Until(t, 30*time.Second, "ten slots of each partition", func() bool {
		for _, p := range []string{"good", "bad"} {
			recs, err := sched.Runs(context.Background(), "settle", p, time.Time{}, time.Now().Add(time.Second), 10)
			if err != nil || len(recs) < 10 {
				return false
			}
		}
		return true
	})

	ctx, stop := browser(t)
	defer acceptDialogs(ctx)()
	defer stop()
	do := stepsWithin(ctx)
	count := func(sel string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](fmt.Sprintf("document.querySelectorAll(%q).length", sel)))
		require.NoError(t, err)
		return n
	}
	text := func(sel string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err)
		return v
	}

	// Log in once: the token lands in sessionStorage.
	require.NoError(t, do(20*time.Second,
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		click(chromedp.ID("login-submit")),
		chromedp.WaitNotVisible(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.CSS(`td.cell[data-partition="good"][data-status="succeeded"]`)),
		chromedp.WaitVisible(chromedp.CSS(`td.cell[data-partition="bad"][data-status="failed"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#leases tr[data-lease]`)),
	))
	stored, err := chromedp.Run(ctx, chromedp.Evaluate[string](`sessionStorage.getItem("holdfast.token")`))
	require.NoError(t, err)
	require.Equal(t, token, stored)
	require.GreaterOrEqual(t, count(`td.cell[data-partition="good"][data-status="succeeded"]`), 3, "a succeeded cell per slot that ran in good")
	require.GreaterOrEqual(t, count(`td.cell[data-partition="bad"][data-status="failed"]`), 3, "a failed cell per slot of bad")
	require.Zero(t, count(`td.cell[data-partition="good"][data-status="failed"]`))
	require.Equal(t, 7, count(`#legend li`)-1, "the legend names the seven statuses and the empty cell")
	jobRow := text(`#jobs tr[data-job="settle"]`)
	require.Contains(t, jobRow, "* * * * * *")
	require.Contains(t, jobRow, "active")
	require.Regexp(t, `\d+ ms`, jobRow, "the lag of the last success")
	require.GreaterOrEqual(t, count(`td.cell[data-partition="stuck"][data-status="none"]`), 3,
		"the stuck partition's slots show as a gap: no record")
	require.Contains(t, text("#leases tbody"), "settle|good", "the unit leases, from the leasedriver.Inspector")
	held := text(`#leases tr[data-lease="settle|stuck"]`)
	require.Contains(t, held, "held")
	require.Contains(t, held, "replica-other ("+fence.OwnerID(stuck.Holder().Owner)+")", "the holder label and owner id")
	require.NotContains(t, held, stuck.Holder().Owner, "never the owner: a write capability")
	require.Contains(t, held, fmt.Sprint(uint64(stuck.Token())), "the holder's token, in full")
	require.Regexp(t, `\d+\.\d s`, held, "its TTL")

	// Open the newest failed slot of bad (a click in the page itself: the
	// grid is redrawn every few seconds), see its one attempt.
	slot, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => {
		const c = document.querySelector('td.cell[data-partition="bad"][data-status="failed"]');
		c.click(); return c.dataset.slot; })()`))
	require.NoError(t, err)
	require.NoError(t, do(10*time.Second, chromedp.WaitVisible(chromedp.CSS(`#attempts tr[data-n="1"]`))))
	at, err := time.Parse(time.RFC3339, slot)
	require.NoError(t, err, "the cell names its slot")
	attempts := text("#attempts tbody")
	require.Contains(t, attempts, "bank refused the batch")
	require.Contains(t, attempts, "permanent")
	require.Contains(t, text("#run-title"), "settle / bad @ "+at.UTC().Format("2006-01-02 15:04:05Z"))

	// Retry it (the confirm dialog is accepted): attempt 2 runs and
	// succeeds, in the attempts table and in the grid.
	cellOf := fmt.Sprintf(`td.cell[data-partition="bad"][data-slot=%q]`, slot)
	require.NoError(t, do(15*time.Second,
		click(chromedp.ID("retry")),
		chromedp.WaitVisible(chromedp.CSS(`#attempts tr[data-n="2"]`)),
		chromedp.WaitVisible(chromedp.CSS(cellOf+`[data-attempt="2"][data-status="succeeded"]`)),
	))
	rec, found, err := sched.Record(context.Background(), "settle", "bad", at)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, ledger.StatusSucceeded, rec.Status)
	require.Equal(t, 2, rec.Attempt)
	require.Equal(t, "retry: console", rec.Reason)

	// Screenshots at desktop and phone width: something is drawn, and at
	// 390 px the grid scrolls in its box while the page does not.
	dir := t.TempDir()
	require.NoError(t, do(15*time.Second, chromedp.EmulateViewport(1280, 1000), chromedp.WaitVisible(chromedp.CSS(cellOf)),
		chromedp.WaitNotVisible(chromedp.ID("notice")), // the retry's note, gone by itself
		chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`)))
	desktop, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	require.NoError(t, do(10*time.Second, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)),
		chromedp.WaitVisible(chromedp.CSS(cellOf)), chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`)))
	phone, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	for name, b := range map[string][]byte{"desktop.png": desktop, "phone.png": phone} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o644))
		checkNotBlank(t, name, b)
	}
	fits, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`(() => {
		const w = document.querySelector('table.grid').closest('.scroll');
		return getComputedStyle(w).overflowX === 'auto' && document.documentElement.scrollWidth <= window.innerWidth; })()`))
	require.NoError(t, err)
	require.True(t, fits, "at 390 px the grid scrolls in its box, the page does not")

	// Pause and resume through the console (each behind confirm()).
	require.NoError(t, do(15*time.Second,
		chromedp.EmulateViewport(1280, 1000),
		click(chromedp.CSS(`#jobs tr[data-job="settle"] button[data-action="pause"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#jobs tr[data-job="settle"] button[data-action="resume"]`)),
	))
	st, err := sched.JobStatus(context.Background(), "settle")
	require.NoError(t, err)
	require.True(t, st.Paused)
	require.Contains(t, text(`#jobs tr[data-job="settle"]`), "paused")
	require.NoError(t, do(15*time.Second,
		click(chromedp.CSS(`#jobs tr[data-job="settle"] button[data-action="resume"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#jobs tr[data-job="settle"] button[data-action="pause"]`)),
	))
	st, err = sched.JobStatus(context.Background(), "settle")
	require.NoError(t, err)
	require.False(t, st.Paused)

	writeScreenshot(t, "", desktop)
	writeScreenshot(t, "-phone", phone)
}

// The demo's link signs in: the token in the URL fragment lands in
// sessionStorage and leaves the address bar; the page follows the
// system's dark mode; the refresh menu pauses and restarts the
// auto-refresh; a job whose window ended says "ended".
func TestConsoleLinkSignsInDarkModeAndRefreshMenu(t *testing.T) {
	url, sched, _ := console(t)
	// Two past slots of "closed" (hourly, ended an hour ago), so that its
	// grid is drawn.
	end := time.Now().Add(-time.Hour)
	slots, err := sched.Backfill(context.Background(), "closed", "", end.Add(-2*time.Hour), end, "test")
	require.NoError(t, err)
	require.Len(t, slots, 2)
	ctx, stop := browser(t)
	defer stop()
	do := stepsWithin(ctx)
	eval := evaluator(ctx, t)

	// The first action runs on ctx itself: it starts the browser, which a
	// shorter step context would end with it.
	_, err = chromedp.Run(ctx, chromedp.Navigate(url+"#token="+token))
	require.NoError(t, err)
	require.NoError(t, do(20*time.Second, chromedp.WaitVisible(chromedp.CSS(`#jobs tr[data-job="settle"]`))))
	require.Equal(t, token, eval(`sessionStorage.getItem("holdfast.token")`), "the fragment's token is kept in the tab")
	require.Equal(t, "", eval(`location.hash`), "and removed from the address bar")
	require.NotContains(t, eval(`location.href`), token)
	require.Equal(t, "true", eval(`String(document.getElementById("login").hidden)`), "signed in: no token form")
	require.NoError(t, do(10*time.Second, chromedp.WaitVisible(chromedp.CSS(`#jobs tr[data-job="closed"] td.ended`))))
	require.Contains(t, eval(`document.querySelector('#jobs tr[data-job="closed"]').textContent`), "ended")
	require.Contains(t, eval(`document.querySelector('#jobs tr[data-job="settle"]').textContent`), "active")
	require.NoError(t, do(20*time.Second, chromedp.WaitVisible(chromedp.CSS(`table.grid[data-job="closed"] td.cell`)),
		chromedp.WaitVisible(chromedp.CSS(`table.grid[data-job="settle"] td.cell`))))
	require.Equal(t, "0", eval(`String(document.querySelectorAll('table.grid[data-job="closed"] button[data-action="trigger"]').length)`),
		"no trigger for a job whose window ended")
	require.Equal(t, "3", eval(`String(document.querySelectorAll('table.grid[data-job="settle"] button[data-action="trigger"]').length)`),
		"one a partition for a job that runs")

	// The refresh menu: paused, then every second.
	require.NoError(t, do(10*time.Second, chromedp.SetValue(chromedp.ID("refresh"), "0"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("refresh").dispatchEvent(new Event("change"))`)))
	require.Equal(t, "null", eval(`String(state.timer)`), "paused: no timer")
	require.Contains(t, eval(`document.getElementById("status").textContent`), "paused")
	require.NoError(t, do(10*time.Second, chromedp.SetValue(chromedp.ID("refresh"), "1000"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("refresh").dispatchEvent(new Event("change"))`),
		chromedp.WaitVisible(chromedp.CSS(`#status`))))
	require.Equal(t, "1000", eval(`String(state.every)`))
	require.NotEqual(t, "null", eval(`String(state.timer)`), "refreshing again")
	testwait.Until(t, 10*time.Second, "a refresh at the new interval", func() bool {
		return strings.Contains(eval(`document.getElementById("status").textContent`), "every 1 s")
	})

	// Dark mode: the system's preference, no toggle.
	light := eval(`getComputedStyle(document.body).backgroundColor`)
	_, err = chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
	require.NoError(t, err)
	dark := eval(`getComputedStyle(document.body).backgroundColor`)
	require.Equal(t, "rgb(246, 247, 249)", light)
	require.Equal(t, "rgb(15, 19, 23)", dark)
}

// The runs list of a job: a deep link opens it (the sign-in token riding
// along in the fragment), its filters (partition, status, time range)
// select and have an address of their own, it pages with the API's cursor
// (next, previous), a chart draws the runs by status, a slot's link opens
// its attempts in a tab of its own (after the token form), the backfill
// form asks for past slots of one partition or all; in dark mode.
func TestConsoleRunsListDeepLinksAndBackfill(t *testing.T) {
	url, sched, _ := console(t)
	testwait.Until(t, 30*time.Second, "eight slots of good and of bad", func() bool {
		for _, p := range []string{"good", "bad"} {
			recs, err := sched.Runs(context.Background(), "settle", p, time.Time{}, time.Now().Add(time.Second), 10)
			if err != nil || len(recs) < 8 {
				return false
			}
		}
		return true
	})
	ctx, stop := browser(t)
	defer acceptDialogs(ctx)()
	defer stop()
	do := stepsWithin(ctx)
	eval := evaluator(ctx, t)
	rows := func() []string { // the listed runs, "partition status slot"
		t.Helper()
		v := eval(`[...document.querySelectorAll("#runs tbody tr")].map((r) => r.dataset.partition + " " + r.dataset.status + " " + r.dataset.slot).join("\n")`)
		if v == "" {
			return nil
		}
		return strings.Split(v, "\n")
	}
	keys := func(rs []string) []string { // "partition slot" of rows, the slot in RFC 3339 seconds
		t.Helper()
		out := make([]string, len(rs))
		for i, r := range rs {
			f := strings.Fields(r)
			at, err := time.Parse(time.RFC3339, f[2])
			require.NoError(t, err, r)
			out[i] = f[0] + " " + at.UTC().Format(time.RFC3339)
		}
		return out
	}
	// ledgerKeys is what the list must show: the runs of every partition
	// with from <= slot < to, newest first, then by partition.
	ledgerKeys := func(partitions []string, from, to time.Time) []string {
		t.Helper()
		type run struct {
			at   time.Time
			part string
		}
		var all []run
		for _, p := range partitions {
			recs, err := sched.Runs(context.Background(), "settle", p, from, to, 1000)
			require.NoError(t, err)
			for _, r := range recs {
				all = append(all, run{r.Slot.At, p})
			}
		}
		slices.SortFunc(all, func(a, b run) int {
			if c := b.at.Compare(a.at); c != 0 {
				return c
			}
			return strings.Compare(a.part, b.part)
		})
		out := make([]string, len(all))
		for i, r := range all {
			out[i] = r.part + " " + r.at.UTC().Format(time.RFC3339)
		}
		return out
	}
	local := func(at time.Time) string { return at.UTC().Format("2006-01-02T15:04:05") } // a datetime-local value, read as UTC
	// form sets fields (id, value, ...) and clicks submit, in the page:
	// chromedp's SetValue cannot pick a select's option of value "", and
	// fails on a datetime-local at a whole minute (it reads back without
	// ":00").
	form := func(submit string, fields ...string) error {
		js := "(() => {\n"
		for i := 0; i+1 < len(fields); i += 2 {
			js += fmt.Sprintf(`{ const e = document.getElementById(%q); e.value = %q;
				if (e.tagName === "SELECT" && e.selectedIndex < 0) throw new Error(%q); }`+"\n", fields[i], fields[i+1], fields[i]+": no option "+fields[i+1])
		}
		js += fmt.Sprintf("document.getElementById(%q).click(); })()", submit)
		return do(10*time.Second, chromedp.Evaluate[chromedp.Void](js))
	}
	filter := func(partition, status, from, to, limit string) error {
		return form("f-apply", "f-partition", partition, "f-status", status, "f-from", from, "f-to", to, "f-limit", limit)
	}

	_, err := chromedp.Run(ctx, chromedp.Navigate(url+"#/jobs/settle&token="+token))
	require.NoError(t, err)
	require.NoError(t, do(20*time.Second, chromedp.WaitVisible(chromedp.CSS(`#runs tbody tr`))))
	require.Equal(t, "#/jobs/settle", eval(`location.hash`), "the token left, the route stayed")
	require.Equal(t, "Runs of settle", eval(`document.getElementById("runs-title").textContent`))

	// Filters: partition bad, status failed; the address says so.
	onlyFailedBad := func() bool {
		rs := rows()
		if len(rs) < 3 {
			return false
		}
		for _, r := range rs {
			if !strings.HasPrefix(r, "bad failed ") {
				return false
			}
		}
		return true
	}
	require.NoError(t, filter("bad", "failed", "", "", "25"))
	testwait.Until(t, 10*time.Second, "only failed runs of bad", onlyFailedBad)
	require.Equal(t, "#/jobs/settle?partition=bad&status=failed", eval(`location.hash`), "the filtered list's address")
	require.Equal(t, "#/jobs/settle?partition=bad&status=failed", eval(`document.getElementById("runs-link").getAttribute("href")`))

	// That address, loaded afresh, opens the same filtered list.
	require.NoError(t, do(20*time.Second, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#runs tbody tr`))))
	require.Equal(t, "bad", eval(`document.getElementById("f-partition").value`))
	require.Equal(t, "failed", eval(`document.getElementById("f-status").value`))
	testwait.Until(t, 10*time.Second, "only failed runs of bad, after a reload", onlyFailedBad)

	// Paging: every partition and status before a fixed instant (a stable
	// list), 10 a page; next, then previous; each page as the ledger has it.
	cutoff := time.Now().UTC().Truncate(time.Second).Add(-time.Second)
	want := ledgerKeys([]string{"good", "bad", "stuck"}, time.Time{}, cutoff)
	require.Greater(t, len(want), 10, "more than a page before the cutoff")
	require.NoError(t, filter("*", "", "", local(cutoff), "10"))
	testwait.Until(t, 10*time.Second, "a first page of 10 with a next one", func() bool {
		return slices.Equal(keys(rows()), want[:10]) && eval(`String(document.getElementById("runs-next").disabled)`) == "false"
	})
	require.Equal(t, "true", eval(`String(document.getElementById("runs-prev").disabled)`), "no page before the first")
	require.Contains(t, eval(`location.hash`), "limit=10")
	first := rows()
	require.NoError(t, do(10*time.Second, click(chromedp.ID("runs-next"))))
	testwait.Until(t, 10*time.Second, "the second page", func() bool {
		return strings.Contains(eval(`document.getElementById("runs-page").textContent`), "page 2")
	})
	require.Equal(t, want[10:min(20, len(want))], keys(rows()), "the second page: the next 10, older")
	require.NoError(t, do(10*time.Second, click(chromedp.ID("runs-prev"))))
	testwait.Until(t, 10*time.Second, "back on the first page", func() bool {
		return strings.Contains(eval(`document.getElementById("runs-page").textContent`), "page 1")
	})
	require.Equal(t, want[:10], keys(rows()), "previous: the first page again")

	// A time range: good's runs with from <= slot < from+3s.
	from, err := time.Parse(time.RFC3339, strings.Fields(first[len(first)-1])[2])
	require.NoError(t, err)
	wantRange := ledgerKeys([]string{"good"}, from, from.Add(3*time.Second))
	require.Len(t, wantRange, 3, "good ran every second")
	require.NoError(t, filter("good", "", local(from), local(from.Add(3*time.Second)), "25"))
	testwait.Until(t, 10*time.Second, "the three runs of the range", func() bool {
		return slices.Equal(keys(rows()), wantRange)
	})

	// The chart: bars per status of every partition, failed among them.
	require.NoError(t, filter("*", "", "", "", "25"))
	testwait.Until(t, 10*time.Second, "a chart with failed runs", func() bool {
		return eval(`String(document.querySelectorAll('#chart rect[data-status="failed"]').length)`) != "0"
	})
	require.NotEqual(t, "0", eval(`String(document.querySelectorAll('#chart rect[data-status="succeeded"]').length)`))

	// A slot's address, opened in a tab of its own (no token there yet):
	// the token form, then that slot's attempts, scrolled into view.
	slot := strings.Fields(first[0])[2]
	part := strings.Fields(first[0])[0]
	at, err := time.Parse(time.RFC3339, slot)
	require.NoError(t, err)
	link := "#/jobs/settle/runs/" + slot + "?partition=" + part
	tab, closeTab := chromedp.NewContext(ctx)
	defer closeTab()
	_, err = chromedp.Run(tab, chromedp.Navigate(url+link)) // on tab itself: it opens the tab
	require.NoError(t, err)
	require.NoError(t, stepsWithin(tab)(20*time.Second,
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		click(chromedp.ID("login-submit")),
		chromedp.WaitVisible(chromedp.CSS(`#attempts tr[data-n="1"]`))))
	title, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.getElementById("run-title").textContent`))
	require.NoError(t, err)
	require.Equal(t, "settle / "+part+" @ "+at.UTC().Format("2006-01-02 15:04:05Z"), title)
	inView, err := chromedp.Run(tab, chromedp.Evaluate[bool](`(() => {
		const r = document.getElementById("run").getBoundingClientRect(); return r.top >= 0 && r.top < innerHeight; })()`))
	require.NoError(t, err)
	require.True(t, inView, "the deep link scrolls to the slot's attempts")
	shared, err := chromedp.Run(tab, chromedp.Evaluate[string](`decodeURIComponent(document.getElementById("run-link").getAttribute("href"))`))
	require.NoError(t, err)
	require.Equal(t, link, shared, "a link to share")
	closeTab()

	// Backfill two past seconds of good (the confirm dialog is accepted).
	bfrom := time.Now().UTC().Add(-20 * time.Second).Truncate(time.Second)
	require.NoError(t, form("b-submit", "b-from", local(bfrom), "b-to", local(bfrom.Add(2*time.Second)), "b-partition", "good"))
	backfilled := func(partitions []string, from time.Time) func() bool {
		return func() bool {
			for _, p := range partitions {
				for _, s := range []time.Time{from, from.Add(time.Second)} {
					rec, found, err := sched.Record(context.Background(), "settle", p, s)
					if err != nil || !found || rec.Reason != "backfill: console" {
						return false
					}
				}
			}
			return true
		}
	}
	testwait.Until(t, 15*time.Second, "the two slots of good backfilled", backfilled([]string{"good"}, bfrom))
	testwait.Until(t, 5*time.Second, "the form's answer", func() bool {
		return eval(`document.getElementById("notice").textContent`) == "backfill asked for 2 slots"
	})
	rec, _, err := sched.Record(context.Background(), "settle", "bad", bfrom)
	require.NoError(t, err)
	require.Empty(t, rec.Reason, "bad: its scheduled run only")
	_, found, err := sched.Record(context.Background(), "settle", "stuck", bfrom)
	require.NoError(t, err)
	require.False(t, found, "stuck: nothing asked")

	// And two of every partition ("stuck" keeps its request pending: its
	// lease is held elsewhere).
	bfrom = bfrom.Add(-10 * time.Second)
	require.NoError(t, form("b-submit", "b-from", local(bfrom), "b-to", local(bfrom.Add(2*time.Second)), "b-partition", "*"))
	testwait.Until(t, 15*time.Second, "two slots of each partition backfilled", backfilled([]string{"good", "bad", "stuck"}, bfrom))
	testwait.Until(t, 5*time.Second, "the form's answer", func() bool {
		return strings.Contains(eval(`document.getElementById("notice").textContent`), "backfill asked for 6 slots in 3 partitions")
	})

	// Dark mode (the system's preference) on the runs of a slot's address;
	// the backfill's note leaves by itself.
	require.NoError(t, filter("*", "", "", "", "10"))
	require.NoError(t, do(10*time.Second, chromedp.WaitNotVisible(chromedp.ID("notice"))))
	_, err = chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
	require.NoError(t, err)
	_, err = chromedp.Run(ctx, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = %q`, link)))
	require.NoError(t, err)
	require.NoError(t, do(10*time.Second, chromedp.WaitVisible(chromedp.CSS(`#attempts tr[data-n="1"]`)),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("runs-section").scrollIntoView()`)))
	require.Equal(t, "10", eval(`String(document.querySelectorAll("#runs tbody tr").length)`), "the list stays as it was")
	require.Equal(t, "rgb(15, 19, 23)", eval(`getComputedStyle(document.body).backgroundColor`))
	require.Equal(t, "rgb(22, 27, 33)", eval(`getComputedStyle(document.getElementById("runs-section")).backgroundColor`))
	shot, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	require.NoError(t, err)
	checkNotBlank(t, "dark.png", shot)
	writeScreenshot(t, "-dark", shot)
}

// writeScreenshot writes b to $HOLDFAST_WRITE_SCREENSHOT (relative to the
// repository root), suffix before its ".png", when that is set.
func writeScreenshot(t *testing.T, suffix string, b []byte) {
	t.Helper()
	out := os.Getenv("HOLDFAST_WRITE_SCREENSHOT")
	if out == "" {
		return
	}
	if !filepath.IsAbs(out) {
		out = filepath.Join("..", "..", "..", out)
	}
	out = strings.TrimSuffix(out, ".png") + suffix + ".png"
	require.NoError(t, os.WriteFile(out, b, 0o644))
	t.Logf("wrote %s", out)
}

// acceptDialogs accepts every confirm() dialog of the browser of ctx,
// from a goroutine of the test's own that ends with the browser's
// context; the returned func waits for it (defer it before the browser's
// stop, so that it runs after).
func acceptDialogs(ctx context.Context) (wait func()) {
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	var accepter sync.WaitGroup
	accepter.Go(func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	})
	return accepter.Wait
}

// click is chromedp.Click, tried again while the node it found is gone
// before the click reached it: the console draws its tables anew on every
// refresh, and a refresh between the query and the click (a busy host
// makes it likely) leaves chromedp a stale node id ("Could not find node
// with given id"). That error comes before the mouse events are sent, so
// a try again does not click twice. The step's bound ends the tries.
func click[S chromedp.Selectable](sel S) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		for {
			v, err := chromedp.Click(sel)(ctx, t)
			if err == nil || !strings.Contains(err.Error(), "Could not find node with given id") || ctx.Err() != nil {
				return v, err
			}
		}
	}
}

// stepsWithin returns a func that runs steps within d: every wait of a
// test has its own bound (the browser, started on ctx with the test's
// whole bound, lives on: a shorter context ends the steps, not it).
func stepsWithin(ctx context.Context) func(d time.Duration, steps ...chromedp.Action[chromedp.Void]) error {
	return func(d time.Duration, steps ...chromedp.Action[chromedp.Void]) error {
		sctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return chromedp.Do(sctx, steps...)
	}
}

// evaluator returns a func that evaluates a JavaScript expression in the
// page and returns it as a string, failing the test on an error.
func evaluator(ctx context.Context, t *testing.T) func(js string) string {
	return func(js string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
		require.NoError(t, err, js)
		return v
	}
}

// checkNotBlank decodes a PNG and wants a drawn page: many colours and a
// fair share of pixels that are not the background.
func checkNotBlank(t *testing.T, name string, b []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	require.NoError(t, err, name)
	bounds := img.Bounds()
	colours := map[uint32]bool{}
	var drawn, all int
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 2 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 2 {
			r, g, b, _ := img.At(x, y).RGBA()
			colours[r>>11<<10|g>>11<<5|b>>11] = true
			all++
			if r < 0xf000 || g < 0xf000 || b < 0xf000 {
				drawn++
			}
		}
	}
	t.Logf("%s: %dx%d, %d colours (5 bits a channel), %.0f%% not white", name, bounds.Dx(), bounds.Dy(), len(colours), 100*float64(drawn)/float64(all))
	require.Greater(t, len(colours), 20, "%s: colours", name)
	require.Greater(t, float64(drawn)/float64(all), 0.05, "%s: share of drawn pixels", name)
}
