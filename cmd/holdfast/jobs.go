package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

func jobsCommand() command {
	c := command{
		name: "job ls", summary: "list jobs: schedule, zone, next fire, paused, last status, last success, lag",
		help: `Lists the jobs a service registered, through its admin handler (GET /jobs):
the cron schedule and zone, the partitions, the next fire, whether paused,
the newest record's status and slot, the newest success and its lag (the
succeeded attempt's start minus its slot time). SKIPPED and FAILED count
the records since SINCE (an hour ago, or later on a busy job) that the job
did not run (skipped by the overlap policy, or missed) and that did not
succeed (failed, abandoned): a LAST STATUS of succeeded with SKIPPED above
0 means slots were lost in between (see Job.Overlap).

Examples:
  holdfast job ls --admin http://127.0.0.1:8080/admin/ --token "$TOKEN"
  HOLDFAST_ADMIN=http://127.0.0.1:8080/admin/ holdfast job ls -o json`,
	}
	c.run = func(ctx context.Context, a *app, args []string) error {
		fs := a.flagSet(c)
		if _, err := a.parse(fs, args, 0); err != nil {
			return err
		}
		page, err := a.fetchJobs(ctx)
		if err != nil {
			return err
		}
		if a.machine() {
			return a.printJSON(page)
		}
		t := a.table("JOB", "SCHEDULE", "ZONE", "PARTITIONS", "NEXT FIRE", "PAUSED", "LAST STATUS", "SKIPPED", "FAILED", "SINCE",
			"LAST SLOT", "LAST SUCCESS", "LAG")
		for _, j := range page.Jobs {
			t.row(j.Name, j.Schedule, j.Zone, partitionsText(j.Partitions), fmtTime(j.NextFire), yesNo(j.Paused),
				j.LastStatus, strconv.Itoa(j.RecentSkipped), strconv.Itoa(j.RecentFailed), fmtTime(j.RecentSince),
				fmtTime(j.LastSlot), fmtTime(j.LastSuccess), lagText(j.LagMS))
		}
		return t.flush()
	}
	return c
}

func partitionsText(ps []string) string {
	if len(ps) == 0 || (len(ps) == 1 && ps[0] == "") {
		return ""
	}
	return strings.Join(ps, ",")
}

// parseTime reads the RFC 3339 time of a flag (with its zone offset, as
// RFC 3339 requires); a usage error otherwise.
func parseTime(flagName, v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, usagef("--%s %q: want an RFC 3339 time such as 2026-12-01T10:00:00Z", flagName, v)
	}
	return t, nil
}

// runsFlags are the flags of runs and watch.
type runsFlags struct {
	partition      string
	from, to, slot string
	status         string
	limit          int
}

func runsCommand() command {
	c := command{
		name: "job runs", args: "JOB [--partition P] [--from T] [--to T] [--status S] [--limit N] [--slot T]",
		summary: "list a job's runs, newest first, or one slot's attempts",
		help: `Lists the runs of JOB newest first, through the admin handler: all partitions
when --partition is not given (--partition '' is the default partition), the
slots in [--from, --to), of --status (succeeded, failed, running, pending,
skipped, missed, abandoned), at most --limit. The TOKEN, HOLDER, OWNER ID,
STARTED and FINISHED columns are the latest attempt's: HOLDER is the label of
the replica that ran it, OWNER ID a hash of its lease owner (the owner itself
is a write capability and is never shown).

With --slot, shows that slot's run and every attempt: holder, owner id, fencing token,
start, last heartbeat, finish and error class; on a job with partitions
--partition is required (a usage error, exit 2, without it).

Examples:
  holdfast job runs settle --admin http://127.0.0.1:8080/admin/
  holdfast job runs settle --partition eu --status failed --from 2026-11-01T00:00:00Z --to 2026-12-01T00:00:00Z
  holdfast job runs settle --slot 2026-11-29T01:00:00Z --partition eu -o json`,
	}
	c.run = func(ctx context.Context, a *app, args []string) error {
		var f runsFlags
		fs := a.flagSet(c)
		fs.StringVar(&f.partition, "partition", "", "the `partition` (default: all; '' is the default partition)")
		fs.StringVar(&f.from, "from", "", "the first slot `time` (RFC 3339), inclusive")
		fs.StringVar(&f.to, "to", "", "the end slot `time` (RFC 3339), exclusive; default now")
		fs.StringVar(&f.slot, "slot", "", "one slot `time` (RFC 3339): its attempts")
		fs.StringVar(&f.status, "status", "", "only runs of this `status`")
		fs.IntVar(&f.limit, "limit", 100, "at most `N` runs")
		pos, err := a.parse(fs, args, 1)
		if err != nil {
			return err
		}
		if f.limit < 1 {
			return a.badUsage(fs, "--limit %d: at least 1", f.limit)
		}
		cl, err := a.adminClient()
		if err != nil {
			return err
		}
		ctx, cancel := a.withTimeout(ctx)
		defer cancel()
		job, partition := pos[0], optional(fs, "partition", f.partition)
		if f.slot != "" {
			return a.showSlot(ctx, cl, job, partition, f.slot)
		}
		q, err := runsQuery(partition, f)
		if err != nil {
			return err
		}
		runs, err := cl.runs(ctx, job, q, f.limit)
		if err != nil {
			return err
		}
		return a.printRuns(runs)
	}
	return c
}

// optional returns &v when the flag name was given, nil otherwise: an
// absent --partition means all partitions, --partition ” the default one.
func optional(fs *flag.FlagSet, name, v string) *string {
	if !isSet(fs, name) {
		return nil
	}
	return &v
}

// runsQuery is the query of GET /jobs/{job}/runs, without limit and cursor.
func runsQuery(partition *string, f runsFlags) (url.Values, error) {
	q := url.Values{}
	if partition != nil {
		q.Set("partition", *partition)
	}
	for _, p := range []struct{ name, v string }{{"from", f.from}, {"to", f.to}} {
		if p.v == "" {
			continue
		}
		t, err := parseTime(p.name, p.v)
		if err != nil {
			return nil, err
		}
		q.Set(p.name, t.UTC().Format(time.RFC3339Nano))
	}
	if f.status != "" {
		q.Set("status", f.status)
	}
	return q, nil
}

// maxPage is the admin API's largest page of runs.
const maxPage = 1000

// runs reads at most limit runs of job, newest first, following
// next_cursor across pages.
func (c *adminClient) runs(ctx context.Context, job string, q url.Values, limit int) ([]schedhttp.RunJSON, error) {
	var out []schedhttp.RunJSON
	for {
		q.Set("limit", strconv.Itoa(min(limit-len(out), maxPage)))
		var page schedhttp.RunsPage
		if err := c.do(ctx, "GET", c.url(q, "jobs", job, "runs"), nil, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Runs...)
		if page.NextCursor == "" || len(out) >= limit || len(page.Runs) == 0 {
			return out[:min(len(out), limit)], nil
		}
		q.Set("cursor", page.NextCursor)
	}
}

// latest returns the run's latest attempt (zero before the first).
func latest(r schedhttp.RunJSON) schedhttp.AttemptJSON {
	if len(r.Attempts) == 0 {
		return schedhttp.AttemptJSON{}
	}
	last := r.Attempts[0]
	for _, at := range r.Attempts {
		if at.N > last.N {
			last = at
		}
	}
	return last
}

func tokenText(at schedhttp.AttemptJSON) string {
	if at.Token == 0 {
		return ""
	}
	return at.Token.String()
}

func (a *app) printRuns(runs []schedhttp.RunJSON) error {
	if a.machine() {
		if runs == nil {
			runs = []schedhttp.RunJSON{}
		}
		return a.printJSON(schedhttp.RunsPage{Runs: runs})
	}
	t := a.table("PARTITION", "SLOT", "STATUS", "ATTEMPT", "TOKEN", "HOLDER", "OWNER ID", "STARTED", "FINISHED", "ERROR CLASS")
	for _, r := range runs {
		at := latest(r)
		t.row(r.Partition, fmtSlot(r.Slot), r.Status, strconv.Itoa(r.Attempt), tokenText(at), at.Holder, at.OwnerID,
			fmtTime(at.Started), fmtTime(at.Finished), at.ErrorClass)
	}
	return t.flush()
}

// showSlot prints one slot's run and its attempts.
func (a *app) showSlot(ctx context.Context, cl *adminClient, job string, partition *string, slotText string) error {
	slot, err := parseTime("slot", slotText)
	if err != nil {
		return err
	}
	q := url.Values{}
	if partition != nil {
		q.Set("partition", *partition)
	}
	var r schedhttp.RunJSON
	if err := cl.do(ctx, "GET", cl.url(q, "jobs", job, "runs", slot.UTC().Format(time.RFC3339Nano)), nil, &r); err != nil {
		if partition == nil && codeOf(err) == exitUsage { // a partitioned job: the slot is one partition's
			return fmt.Errorf("%w (give --partition P; runs JOB without --slot lists every partition)", err)
		}
		return err
	}
	if a.machine() {
		return a.printJSON(r)
	}
	fmt.Fprintf(a.stdout, "job %s  partition %s  slot %s  status %s  attempt %d\n",
		r.Job, dash(r.Partition), fmtSlot(r.Slot), r.Status, r.Attempt)
	if !r.RetryAt.IsZero() {
		fmt.Fprintf(a.stdout, "retry at %s\n", fmtTime(r.RetryAt))
	}
	if r.Reason != "" {
		fmt.Fprintf(a.stdout, "reason: %s\n", printable(r.Reason))
	}
	t := a.table("N", "STATUS", "TOKEN", "HOLDER", "OWNER ID", "STARTED", "HEARTBEAT", "FINISHED", "ERROR CLASS", "ERROR")
	for _, at := range r.Attempts {
		t.row(strconv.Itoa(at.N), at.Status, tokenText(at), at.Holder, at.OwnerID, fmtTime(at.Started), fmtTime(at.Heartbeat),
			fmtTime(at.Finished), at.ErrorClass, at.Error)
	}
	return t.flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func jobShowCommand() command {
	c := command{
		name: "job show", args: "JOB", summary: "show one job: schedule, next fire, paused, last status, recent skips and failures",
		help: `Shows one job of GET /jobs, a field a line: its schedule and zone, its
partitions and overlap policy, the next fire, whether paused, the newest
record's status and slot, the skipped and failed records since SINCE (an
hour ago, or later on a busy job), the newest success and its lag. An
unknown job exits 3.

Examples:
  holdfast job show settle --admin http://127.0.0.1:8080/admin/
  holdfast job show settle -o json`,
	}
	c.run = func(ctx context.Context, a *app, args []string) error {
		fs := a.flagSet(c)
		pos, err := a.parse(fs, args, 1)
		if err != nil {
			return err
		}
		page, err := a.fetchJobs(ctx)
		if err != nil {
			return err
		}
		for _, j := range page.Jobs {
			if j.Name != pos[0] {
				continue
			}
			if a.machine() {
				return a.printJSON(j)
			}
			t := a.table("FIELD", "VALUE")
			for _, kv := range [][2]string{
				{"job", j.Name}, {"schedule", j.Schedule}, {"zone", j.Zone}, {"partitions", partitionsText(j.Partitions)},
				{"overlap", j.Overlap}, {"next fire", fmtTime(j.NextFire)}, {"paused", yesNo(j.Paused)},
				{"last status", j.LastStatus}, {"last slot", fmtTime(j.LastSlot)},
				{"skipped", strconv.Itoa(j.RecentSkipped)}, {"failed", strconv.Itoa(j.RecentFailed)}, {"since", fmtTime(j.RecentSince)},
				{"last success", fmtTime(j.LastSuccess)}, {"lag", lagText(j.LagMS)},
			} {
				t.row(kv[0], kv[1])
			}
			return t.flush()
		}
		return notFoundf("job show: no job %q (holdfast job ls lists them)", redactArgs([]string{pos[0]})[0])
	}
	return c
}

// fetchJobs asks the admin API for GET /jobs (every registered job with
// its status) within the command's timeout.
func (a *app) fetchJobs(ctx context.Context) (schedhttp.JobsPage, error) {
	cl, err := a.adminClient()
	if err != nil {
		return schedhttp.JobsPage{}, err
	}
	ctx, cancel := a.withTimeout(ctx)
	defer cancel()
	return cl.jobs(ctx)
}

// jobs sends GET /jobs.
func (cl *adminClient) jobs(ctx context.Context) (schedhttp.JobsPage, error) {
	var page schedhttp.JobsPage
	err := cl.do(ctx, "GET", cl.url(nil, "jobs"), nil, &page)
	return page, err
}

// lagText is a job's lag for a table: empty when it has none.
func lagText(ms *int64) string {
	if ms == nil {
		return ""
	}
	return fmtMS(*ms)
}
