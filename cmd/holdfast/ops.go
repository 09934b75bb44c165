package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

// opFlags are the flags of retry, trigger and backfill.
type opFlags struct {
	partition, slot, from, to, reason string
	skipPaused                        bool // resume --skip-paused
	allPartitions                     bool // retry, backfill --all-partitions
}

// opCommand builds one of the admin write commands on JOB: register adds
// its own flags (nil: none), do sends the request and prints the reply.
func opCommand(c command, register func(fs *flag.FlagSet, f *opFlags), do func(ctx context.Context, a *app, cl *adminClient, job string, f opFlags) error) command {
	c.run = func(ctx context.Context, a *app, args []string) error {
		var f opFlags
		fs := a.flagSet(c)
		if register != nil {
			register(fs, &f)
		}
		pos, err := a.parse(fs, args, 1)
		if err != nil {
			return err
		}
		cl, err := a.adminClient()
		if err != nil {
			return err
		}
		ctx, cancel := a.withTimeout(ctx)
		defer cancel()
		return do(ctx, a, cl, pos[0], f)
	}
	return c
}

func partitionFlag(fs *flag.FlagSet, f *opFlags) {
	fs.StringVar(&f.partition, "partition", "", "the `partition` (default: the default partition '')")
}

func allPartitionsFlag(fs *flag.FlagSet, f *opFlags) {
	fs.BoolVar(&f.allPartitions, "all-partitions", false, "every partition of the job (not with --partition)")
}

// eachPartition calls ask for f.partition, or with --all-partitions for
// every partition of job (read from GET /jobs), and returns the slots
// asked for. With --all-partitions it goes on past a partition's error
// (a running slot: 409), reports each on stderr, and returns the first.
func (a *app) eachPartition(ctx context.Context, cl *adminClient, job string, f opFlags, ask func(partition string) ([]schedhttp.SlotJSON, error)) ([]schedhttp.SlotJSON, error) {
	if !f.allPartitions {
		return ask(f.partition)
	}
	if f.partition != "" {
		return nil, usagef("--partition and --all-partitions: give one")
	}
	page, err := cl.jobs(ctx)
	if err != nil {
		return nil, err
	}
	var partitions []string
	found := false
	for _, j := range page.Jobs {
		if j.Name == job {
			found, partitions = true, j.Partitions
		}
	}
	if !found {
		return nil, notFoundf("no job %q (holdfast job ls lists them)", redactArgs([]string{job})[0])
	}
	if len(partitions) == 0 {
		partitions = []string{""}
	}
	var out []schedhttp.SlotJSON
	var first error
	for _, p := range partitions {
		slots, err := ask(p)
		out = append(out, slots...)
		if err != nil {
			fmt.Fprintf(a.stderr, "holdfast: partition %q: %s\n", p, printable(redactText(err.Error())))
			if first == nil {
				first = err
			}
		}
	}
	return out, first
}

// printSlotsPaused is printSlots followed, for people, by a line saying
// that the runs asked for wait: job is paused (the API's "paused": true,
// which machine output carries in v).
func (a *app) printSlotsPaused(verb string, v any, slots []schedhttp.SlotJSON, job string, paused bool) error {
	if err := a.printSlots(verb, v, slots); err != nil || !paused || a.machine() {
		return err
	}
	runs := "the runs wait"
	if len(slots) == 1 {
		runs = "the run waits"
	}
	_, err := fmt.Fprintf(a.stdout, "job %s is paused: %s until it is resumed (holdfast job resume %s)\n", job, runs, job)
	return err
}

func reasonFlag(fs *flag.FlagSet, f *opFlags) {
	fs.StringVar(&f.reason, "reason", "", "why, recorded with the run (`text`)")
}

func retryCommand() command {
	return opCommand(command{
		name: "job retry", args: "JOB --slot T [--partition P|--all-partitions] [--reason R]", summary: "run a done slot again (a new attempt)",
		help: `Asks the service to run the slot T of JOB again: its next attempt starts on
the next claim. A slot that is running is refused (409, exit 4); a time that
is not a slot of JOB, or is outside its StartAt/EndAt, is a usage error (400,
exit 2). --all-partitions retries the slot in every partition of JOB (read
from GET /jobs), going on past a partition that refuses (a running slot) and
exiting with the first refusal's code. On a paused job the retry is recorded
but waits until the job is resumed: the output says so ("paused": true with
-o json).

Examples:
  holdfast job retry settle --slot 2026-11-29T01:00:00Z --partition eu --reason "bank was down"
  holdfast job retry settle --slot 2026-11-29T01:00:00Z --all-partitions
  holdfast job retry report --slot 2026-12-01T06:00:00Z -o json`,
	}, func(fs *flag.FlagSet, f *opFlags) {
		partitionFlag(fs, f)
		allPartitionsFlag(fs, f)
		reasonFlag(fs, f)
		fs.StringVar(&f.slot, "slot", "", "the slot `time` (RFC 3339), required")
	}, func(ctx context.Context, a *app, cl *adminClient, job string, f opFlags) error {
		if f.slot == "" {
			return usagef("retry: --slot is required")
		}
		slot, err := parseTime("slot", f.slot)
		if err != nil {
			return err
		}
		paused := false
		slots, err := a.eachPartition(ctx, cl, job, f, func(p string) ([]schedhttp.SlotJSON, error) {
			var out schedhttp.SlotResponse
			req := schedhttp.RetryRequest{Partition: p, Slot: schedhttp.Time{Time: slot}, Reason: f.reason}
			if err := cl.do(ctx, "POST", cl.url(nil, "jobs", job, "retry"), req, &out); err != nil {
				return nil, err
			}
			paused = paused || out.Paused
			return []schedhttp.SlotJSON{out.Slot}, nil
		})
		switch {
		case !f.allPartitions && err != nil, len(slots) == 0 && err != nil:
			return err
		case !f.allPartitions:
			return a.printSlotsPaused("retry asked", schedhttp.SlotResponse{Slot: slots[0], Paused: paused}, slots, job, paused)
		}
		if perr := a.printSlotsPaused("retry asked", schedhttp.SlotsResponse{Slots: nonNil(slots), Paused: paused}, slots, job, paused); perr != nil {
			return perr
		}
		return err
	})
}

func triggerCommand() command {
	return opCommand(command{
		name: "job trigger", args: "JOB [--partition P] [--reason R]", summary: "run a job now (an extra slot)",
		help: `Asks the service to run JOB now, in an extra slot at the current time.
A job before its StartAt or at or after its EndAt has no slot now: a usage
error (400, exit 2). On a paused job the run is recorded but waits until
the job is resumed (holdfast job resume): the output says so ("paused":
true with -o json).

Examples:
  holdfast job trigger settle --partition us --reason "month end"
  holdfast job trigger report -o json`,
	}, func(fs *flag.FlagSet, f *opFlags) {
		partitionFlag(fs, f)
		reasonFlag(fs, f)
	}, func(ctx context.Context, a *app, cl *adminClient, job string, f opFlags) error {
		var out schedhttp.SlotResponse
		req := schedhttp.TriggerRequest{Partition: f.partition, Reason: f.reason}
		if err := cl.do(ctx, "POST", cl.url(nil, "jobs", job, "trigger"), req, &out); err != nil {
			return err
		}
		return a.printSlotsPaused("triggered", out, []schedhttp.SlotJSON{out.Slot}, job, out.Paused)
	})
}

func backfillCommand() command {
	return opCommand(command{
		name: "job backfill", args: "JOB --from T --to T [--partition P|--all-partitions] [--reason R]", summary: "run the slots of a past range again",
		help: `Asks the service to run again every slot of JOB with --from <= slot < --to
(at most 1000), as retry does for one: each slot gets a new
attempt, succeeded ones included; running slots are left alone. The effects
are fenced per slot: each attempt writes with its own lease's fencing token
and the slot's idempotency key, so a sink keyed by them can apply a slot once.
The range is clipped to the job's StartAt/EndAt; a range with nothing left
inside them is a usage error (400, exit 2). --all-partitions backfills every
partition of JOB (read from GET /jobs). On a paused job the slots are
recorded but wait until the job is resumed: the output says so ("paused":
true with -o json).

Examples:
  holdfast job backfill settle --partition us --from 2026-11-20T00:00:00Z --to 2026-11-23T00:00:00Z
  holdfast job backfill settle --all-partitions --from 2026-11-20T00:00:00Z --to 2026-11-23T00:00:00Z
  holdfast job backfill report --from 2026-11-30T00:00:00Z --to 2026-12-01T00:00:00Z -o json`,
	}, func(fs *flag.FlagSet, f *opFlags) {
		partitionFlag(fs, f)
		allPartitionsFlag(fs, f)
		reasonFlag(fs, f)
		fs.StringVar(&f.from, "from", "", "the first slot `time` (RFC 3339), inclusive, required")
		fs.StringVar(&f.to, "to", "", "the end `time` (RFC 3339), exclusive, required")
	}, func(ctx context.Context, a *app, cl *adminClient, job string, f opFlags) error {
		if f.from == "" || f.to == "" {
			return usagef("backfill: --from and --to are required")
		}
		from, err := parseTime("from", f.from)
		if err != nil {
			return err
		}
		to, err := parseTime("to", f.to)
		if err != nil {
			return err
		}
		paused := false
		slots, err := a.eachPartition(ctx, cl, job, f, func(p string) ([]schedhttp.SlotJSON, error) {
			var out schedhttp.SlotsResponse
			req := schedhttp.BackfillRequest{Partition: p, From: schedhttp.Time{Time: from}, To: schedhttp.Time{Time: to}, Reason: f.reason}
			if err := cl.do(ctx, "POST", cl.url(nil, "jobs", job, "backfill"), req, &out); err != nil {
				return nil, err
			}
			paused = paused || out.Paused
			return out.Slots, nil
		})
		if len(slots) == 0 && err != nil {
			return err
		}
		if perr := a.printSlotsPaused("backfill asked", schedhttp.SlotsResponse{Slots: nonNil(slots), Paused: paused}, slots, job, paused); perr != nil {
			return perr
		}
		return err
	})
}

func pauseCommand() command {
	return pauseResume("pause", "JOB", "pause a job: no new slot starts", `Running attempts are not stopped by a pause. The slots that come due while
the job is paused run on resume as the job's missed-slot policy says
(Job.Missed), unless resume is given --skip-paused.`, nil)
}

func resumeCommand() command {
	return pauseResume("resume", "JOB [--skip-paused]", "resume a paused job",
		`The slots that came due while the job was paused are caught up as the job's
missed-slot policy says (Job.Missed; by default up to MaxCatchUp of them).
With --skip-paused they are recorded skipped (reason "paused") and none of
them runs: the next slot on schedule is the first to run.`,
		func(fs *flag.FlagSet, f *opFlags) {
			fs.BoolVar(&f.skipPaused, "skip-paused", false, "record the slots that came due while paused skipped instead of catching them up")
		})
}

func pauseResume(name, args, summary, help string, register func(fs *flag.FlagSet, f *opFlags)) command {
	return opCommand(command{
		name: "job " + name, args: args, summary: summary,
		help: fmt.Sprintf(`%s%s. %s

Examples:
  holdfast job %s settle --admin http://127.0.0.1:8080/admin/
  holdfast job %s report -o json`, strings.ToUpper(summary[:1]), summary[1:], help, name, name),
	}, register, func(ctx context.Context, a *app, cl *adminClient, job string, f opFlags) error {
		var out schedhttp.PausedResponse
		var body any
		if f.skipPaused {
			body = schedhttp.ResumeRequest{SkipPaused: true}
		}
		if err := cl.do(ctx, "POST", cl.url(nil, "jobs", job, name), body, &out); err != nil {
			return err
		}
		if a.machine() {
			return a.printJSON(out)
		}
		fmt.Fprintf(a.stdout, "job %s paused: %s\n", out.Job, yesNo(out.Paused))
		return nil
	})
}

// printSlots prints the slots a write asked for (out as JSON).
func (a *app) printSlots(what string, out any, slots []schedhttp.SlotJSON) error {
	if a.machine() {
		return a.printJSON(out)
	}
	fmt.Fprintf(a.stdout, "%s: %d slot(s)\n", what, len(slots))
	t := a.table("JOB", "PARTITION", "SLOT")
	for _, s := range slots {
		t.row(s.Job, s.Partition, fmtSlot(s.Slot))
	}
	return t.flush()
}

// nonNil is slots, [] rather than null in JSON when empty.
func nonNil(slots []schedhttp.SlotJSON) []schedhttp.SlotJSON {
	if slots == nil {
		return []schedhttp.SlotJSON{}
	}
	return slots
}
