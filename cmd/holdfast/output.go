package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/holdfast-go/holdfast/scheduler/schedhttp"
)

// machine reports whether the output is for programs: -o json or jsonl.
func (a *app) machine() bool { return a.conn.output == "json" || a.conn.output == "jsonl" }

// printJSON writes v, in the admin API's wire shapes: with -o json as one
// indented document; with -o jsonl one compact object a line, a page's
// items one a line (jobs, runs, leases, slots), anything else on one line.
func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	if a.conn.output != "jsonl" {
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	var items []any
	switch p := v.(type) {
	case schedhttp.JobsPage:
		items = each(p.Jobs)
	case schedhttp.RunsPage:
		items = each(p.Runs)
	case schedhttp.LeasesPage:
		items = each(p.Leases)
	case schedhttp.SlotsResponse:
		items = each(p.Slots)
	default:
		return enc.Encode(v)
	}
	for _, it := range items {
		if err := enc.Encode(it); err != nil {
			return err
		}
	}
	return nil
}

func each[T any](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

// table is an aligned table for people (-o table).
type table struct{ tw *tabwriter.Writer }

func (a *app) table(header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c == "" {
			cells[i] = "-"
		}
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// holderText names who holds or ran something in a line of text: the
// holder label and the owner id (fence.OwnerID), "label (id)", either
// alone when the other is empty. The owner itself is a write capability
// and never reaches the CLI: the admin API and the lease views give only
// its id.
func holderText(holder, ownerID string) string {
	switch {
	case holder == "":
		return ownerID
	case ownerID == "":
		return holder
	}
	return holder + " (" + ownerID + ")"
}

// fmtTime writes t in UTC to the second, or "" (shown "-") for zero.
func fmtTime(t schedhttp.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// fmtSlot writes a slot's instant: every one is a time, the year 1's
// (0001-01-01T00:00:00Z, a slot of a schedule as any other) included, where
// fmtTime leaves a zero time blank.
func fmtSlot(t schedhttp.Time) string { return t.UTC().Format(time.RFC3339) }

// fmtMS writes a duration of ms, rounded to ms.
func fmtMS(ms int64) string {
	return (time.Duration(ms) * time.Millisecond).String()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
