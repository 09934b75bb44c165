package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/lease/redislease"
	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

// watchEvent is one line of watch's -o json output (JSON lines).
type watchEvent struct {
	At    time.Time            `json:"at"`
	Kind  string               `json:"kind"` // run or lease
	Run   *schedhttp.RunJSON   `json:"run,omitempty"`
	Lease *schedhttp.LeaseJSON `json:"lease,omitempty"`
}

func watchCommand() command {
	c := command{
		name: "job watch", args: "JOB [--partition P] [--interval D] [--limit N]",
		summary: "follow a job live: print runs and claims as they change",
		help: `Polls the admin handler every --interval and prints each run of JOB (the
newest --limit) whose status, attempt or holder changed, and each claim (the
job's leases: JOB, JOB|PARTITION, JOB...@SLOT) taken, handed over or
released. The first poll prints the current state. Runs until Ctrl-C; a
failed poll (the service restarting) is reported and polled again, an
unknown job (exit 3) or a refusal (exit 4) ends it. Leases
are read from --redis when given, else from the admin handler (skipped when
it has no lease inspector). -o jsonl streams one JSON object a line (-o json
too: a stream has no one document).

Examples:
  holdfast job watch settle --admin http://127.0.0.1:8080/admin/ --interval 1s
  holdfast job watch settle --partition eu --redis redis://127.0.0.1:6379/0 -o jsonl`,
	}
	c.run = func(ctx context.Context, a *app, args []string) error {
		var f runsFlags
		var interval time.Duration
		var prefix string
		fs := a.flagSet(c)
		fs.StringVar(&f.partition, "partition", "", "the `partition` (default: all)")
		fs.IntVar(&f.limit, "limit", 20, "follow the newest `N` runs")
		fs.DurationVar(&interval, "interval", 2*time.Second, "the refresh `period`")
		fs.StringVar(&prefix, "prefix", redislease.DefaultPrefix, "lease key `prefix` (--redis only)")
		pos, err := a.parse(fs, args, 1)
		if err != nil {
			return err
		}
		if interval <= 0 || f.limit < 1 {
			return a.badUsage(fs, "--interval and --limit must be positive")
		}
		cl, err := a.adminClient()
		if err != nil {
			return err
		}
		w := &watcher{a: a, cl: cl, job: pos[0], prefix: prefix, limit: f.limit,
			partition: optional(fs, "partition", f.partition), runs: map[string]string{}, leases: map[string]string{}}
		return w.loop(ctx, interval)
	}
	return c
}

// watcher is the state of one watch: what it printed last.
type watcher struct {
	a         *app
	cl        *adminClient
	job       string
	prefix    string
	partition *string
	limit     int
	runs      map[string]string // partition|slot -> fingerprint
	leases    map[string]string // name -> fingerprint
	noLeases  bool              // the admin handler has no lease inspector
}

func (w *watcher) loop(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := w.poll(ctx); err != nil {
			switch {
			case ctx.Err() != nil:
				return nil // Ctrl-C: a normal end
			case codeOf(err) != exitError:
				return err // usage, not found, refused: polling again changes nothing
			}
			// The service restarting, a timeout: say so, and poll again.
			fmt.Fprintf(w.a.stderr, "holdfast: watch: %s (polling again)\n", printable(redactText(err.Error())))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// poll reads once and prints the changes.
func (w *watcher) poll(ctx context.Context) error {
	ctx, cancel := w.a.withTimeout(ctx)
	defer cancel()
	q := url.Values{}
	if w.partition != nil {
		q.Set("partition", *w.partition)
	}
	runs, err := w.cl.runs(ctx, w.job, q, w.limit)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	for i := len(runs) - 1; i >= 0; i-- { // oldest first, as they happened
		r := runs[i]
		at := latest(r)
		key := r.Partition + "|" + fmtSlot(r.Slot)
		fp := fmt.Sprint(r.Status, r.Attempt, at.Token, at.OwnerID)
		if w.runs[key] == fp {
			continue
		}
		w.runs[key] = fp
		w.print(watchEvent{At: now, Kind: "run", Run: &r},
			fmt.Sprintf("run    %s  %s  %s  attempt %d  token %s  holder %s  %s",
				dash(r.Partition), fmtSlot(r.Slot), r.Status, r.Attempt, dash(tokenText(at)), dash(holderText(at.Holder, at.OwnerID)), at.ErrorClass))
	}
	return w.pollLeases(ctx, now)
}

func (w *watcher) pollLeases(ctx context.Context, now time.Time) error {
	if w.noLeases {
		return nil
	}
	leases, err := w.a.listLeases(ctx, leaseFlags{prefix: w.prefix}, globEscape(w.job)+"*", 1000)
	if err != nil {
		if codeOf(err) == exitNotFound && w.a.conn.redis == "" {
			w.noLeases = true // no lease inspector on the admin handler
			fmt.Fprintf(w.a.stderr, "holdfast: watch: no leases from the admin handler (%s); following runs only\n", printable(redactText(err.Error())))
			return nil
		}
		return err
	}
	seen := map[string]bool{}
	for _, l := range leases {
		if !w.ofJob(l.Name) {
			continue
		}
		seen[l.Name] = true
		fp := fmt.Sprint(l.Held, l.OwnerID, l.Token)
		if w.leases[l.Name] == fp {
			continue
		}
		w.leases[l.Name] = fp
		state := "released"
		if l.Held {
			state = "held by " + holderText(l.Holder, l.OwnerID)
		}
		w.print(watchEvent{At: now, Kind: "lease", Lease: &l},
			fmt.Sprintf("claim  %s  %s  token %s", l.Name, state, l.Token))
	}
	for name := range w.leases {
		if !seen[name] {
			delete(w.leases, name) // its keys are gone
		}
	}
	return nil
}

// ofJob reports whether the lease name is one of the job's: the unit's
// (job, job|partition) or a slot's under OverlapAllow (...@unix).
func (w *watcher) ofJob(name string) bool {
	unit, _, _ := strings.Cut(name, "@")
	job, partition, hasPartition := strings.Cut(unit, "|")
	if job != w.job {
		return false
	}
	return w.partition == nil || partition == *w.partition || (!hasPartition && *w.partition == "")
}

func (w *watcher) print(ev watchEvent, text string) {
	if w.a.machine() {
		b, err := json.Marshal(ev)
		if err == nil {
			fmt.Fprintln(w.a.stdout, string(b))
		}
		return
	}
	fmt.Fprintf(w.a.stdout, "%s  %s\n", ev.At.Format(time.TimeOnly), strings.TrimRight(text, " "))
}
