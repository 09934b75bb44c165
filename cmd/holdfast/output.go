package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

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
			c = "-"
		}
		cells[i] = printable(c)
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

// printable returns s with every control character (C0, DEL, C1: escape,
// carriage return, tab, line feed, ...) and every format character
// (Unicode Cf: bidi overrides, zero-width marks) written as its Go escape
// (\x1b, \r, \u202e), and every byte that is not UTF-8 as \xNN: free
// text from the ledger and the admin API (a job's error, an operator's
// reason) reaches a terminal as text, never as an escape sequence, a
// forged row or text that reads backwards. -o json escapes them as JSON
// does.
func printable(s string) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, hidden) {
		return s
	}
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0]) // a byte that is not UTF-8 (0x9b is a C1 CSI to some terminals)
		case hidden(r):
			q := strconv.QuoteRune(r) // '\x1b', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

// hidden reports whether r is a control or a format character.
func hidden(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }

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
