package schedhttp

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// runsQuery is a parsed GET /jobs/{job}/runs.
type runsQuery struct {
	job        string
	partitions []string
	from, to   time.Time
	status     map[ledger.Status]bool // nil: every status
	limit      int
	after      *cursor
}

// cursor is where a page of runs ended: the last run's slot and
// partition. The order is slot descending, then partition ascending.
type cursor struct {
	Slot      int64  `json:"s"` // Unix seconds
	Partition string `json:"p"`
}

func (c cursor) encode() string {
	b, _ := json.Marshal(c) // two plain fields: cannot fail
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(v string) (*cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(v)
	var c cursor
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		return nil, badField("cursor", "not one of a previous page's next_cursor")
	}
	return &c, nil
}

// runs serves GET /jobs/{job}/runs: the records of the asked-for
// partitions (all of the job's when partition is omitted), merged newest
// first, filtered by status, one page of limit at a time.
func (h *adminHandler) runs(w http.ResponseWriter, r *http.Request) error {
	q, err := h.parseRuns(r)
	if err != nil {
		return err
	}
	var all []ledger.Record
	for _, p := range q.partitions {
		recs, err := h.collect(r.Context(), q, p)
		if err != nil {
			return err
		}
		all = append(all, recs...)
	}
	slices.SortFunc(all, func(a, b ledger.Record) int {
		if c := b.Slot.At.Compare(a.Slot.At); c != 0 {
			return c
		}
		return cmp.Compare(a.Slot.Partition, b.Slot.Partition)
	})
	page := RunsPage{Runs: []RunJSON{}}
	if len(all) > q.limit {
		all = all[:q.limit]
		last := all[len(all)-1].Slot
		page.NextCursor = cursor{Slot: last.At.Unix(), Partition: last.Partition}.encode()
	}
	for _, rec := range all {
		page.Runs = append(page.Runs, runJSON(rec))
	}
	return writeJSON(w, http.StatusOK, page)
}

// collect returns up to limit+1 records of partition p that match q,
// newest first, after q's cursor: enough to fill the page and tell
// whether another follows. It pages through the ledger when a status
// filter drops records.
func (h *adminHandler) collect(ctx context.Context, q runsQuery, p string) ([]ledger.Record, error) {
	to := q.to
	if c := q.after; c != nil {
		end := time.Unix(c.Slot, 0).UTC() // runs of slots before the cursor's
		if p > c.Partition {
			end = end.Add(time.Second) // and of its slot, in later partitions
		}
		if end.Before(to) {
			to = end
		}
	}
	want := q.limit + 1
	batch := want
	if q.status != nil {
		batch = MaxLimit
	}
	var out []ledger.Record
	for len(out) < want && to.After(q.from) {
		recs, err := h.s.Runs(ctx, q.job, p, q.from, to, batch)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			if q.status == nil || q.status[rec.Status] {
				out = append(out, rec)
			}
		}
		if len(recs) < batch {
			break
		}
		to = recs[len(recs)-1].Slot.At
	}
	if len(out) > want {
		out = out[:want]
	}
	return out, nil
}

var statuses = []ledger.Status{ledger.StatusSucceeded, ledger.StatusFailed, ledger.StatusRunning, ledger.StatusPending,
	ledger.StatusSkipped, ledger.StatusMissed, ledger.StatusAbandoned}

func (h *adminHandler) parseRuns(r *http.Request) (runsQuery, error) {
	v := r.URL.Query()
	q := runsQuery{job: r.PathValue("job"), to: h.cfg.Clock.Now().Add(time.Second)}
	var err error
	if q.limit, err = parseLimit(v.Get("limit")); err != nil {
		return q, err
	}
	if s := v.Get("from"); s != "" {
		if q.from, err = parseTime("from", s); err != nil {
			return q, err
		}
	}
	if s := v.Get("to"); s != "" {
		if q.to, err = parseTime("to", s); err != nil {
			return q, err
		}
	}
	if !q.to.After(q.from) {
		return q, badField("to", "want from < to")
	}
	if s := v.Get("cursor"); s != "" {
		if q.after, err = decodeCursor(s); err != nil {
			return q, err
		}
	}
	if s := v.Get("status"); s != "" {
		q.status = map[ledger.Status]bool{}
		for _, one := range strings.Split(s, ",") {
			if !slices.Contains(statuses, ledger.Status(one)) {
				return q, badField("status", "%s: want one of %v", echo(one), statuses)
			}
			q.status[ledger.Status(one)] = true
		}
	}
	if _, ok := v["partition"]; ok {
		q.partitions = []string{v.Get("partition")}
		return q, nil
	}
	for _, info := range h.s.Jobs() {
		if info.Name == q.job {
			q.partitions = slices.Sorted(slices.Values(info.Partitions))
			return q, nil
		}
	}
	return q, fmt.Errorf("%w: %q", scheduler.ErrUnknownJob, q.job)
}
