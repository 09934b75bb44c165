package schedhttp

import (
	"fmt"
	"net/http"
	"path"
	"slices"
	"strconv"
	"time"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

func (h *adminHandler) jobs(w http.ResponseWriter, r *http.Request) error {
	page := JobsPage{Jobs: []JobJSON{}}
	for _, info := range h.s.Jobs() {
		st, err := h.s.JobStatus(r.Context(), info.Name)
		if err != nil {
			return err
		}
		page.Jobs = append(page.Jobs, jobJSON(info, st))
	}
	return writeJSON(w, http.StatusOK, page)
}

// run serves GET /jobs/{job}/runs/{slot}?partition=P: 404 when the
// ledger has no record of the slot; 400 when partition is absent and the
// job has partitions (one slot is one partition's; GET /runs lists all).
func (h *adminHandler) run(w http.ResponseWriter, r *http.Request) error {
	at, err := parseTime("slot", r.PathValue("slot"))
	if err != nil {
		return err
	}
	job, q := r.PathValue("job"), r.URL.Query()
	if !q.Has("partition") {
		if err := h.needPartition(job, ""); err != nil {
			return err
		}
	}
	rec, found, err := h.s.Record(r.Context(), job, q.Get("partition"), at)
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("%w: no record of that slot", errNotFound)
	}
	return writeJSON(w, http.StatusOK, runJSON(rec))
}

func (h *adminHandler) retry(w http.ResponseWriter, r *http.Request) error {
	var req RetryRequest
	present, err := decodeMembers(r, &req)
	if err != nil {
		return err
	}
	if !present["slot"] {
		return badField("slot", "required")
	}
	job := r.PathValue("job")
	if err := h.needPartition(job, req.Partition); err != nil {
		return err
	}
	if err := h.s.Retry(r.Context(), job, req.Partition, req.Slot.Time, req.Reason); err != nil {
		return err
	}
	slot := ledger.Slot{Job: job, At: req.Slot.UTC().Truncate(time.Second), Partition: req.Partition}
	return writeJSON(w, http.StatusAccepted, SlotResponse{Slot: slotJSON(slot), Paused: h.paused(r, job)})
}

func (h *adminHandler) trigger(w http.ResponseWriter, r *http.Request) error {
	var req TriggerRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := h.needPartition(r.PathValue("job"), req.Partition); err != nil {
		return err
	}
	slot, err := h.s.Trigger(r.Context(), r.PathValue("job"), req.Partition, req.Reason)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusAccepted, SlotResponse{Slot: slotJSON(slot), Paused: h.paused(r, r.PathValue("job"))})
}

func (h *adminHandler) backfill(w http.ResponseWriter, r *http.Request) error {
	var req BackfillRequest
	present, err := decodeMembers(r, &req)
	if err != nil {
		return err
	}
	switch { // present, not IsZero: 0001-01-01T00:00:00Z is a time
	case !present["from"]:
		return badField("from", "required")
	case !present["to"]:
		return badField("to", "required")
	case !req.To.After(req.From.Time):
		return badField("to", "want from < to")
	}
	if err := h.needPartition(r.PathValue("job"), req.Partition); err != nil {
		return err
	}
	slots, err := h.s.Backfill(r.Context(), r.PathValue("job"), req.Partition, req.From.Time, req.To.Time, req.Reason)
	if err != nil {
		return err
	}
	out := SlotsResponse{Slots: []SlotJSON{}, Paused: h.paused(r, r.PathValue("job"))}
	for _, s := range slots {
		out.Slots = append(out.Slots, slotJSON(s))
	}
	return writeJSON(w, http.StatusAccepted, out)
}

// paused reports whether job is paused, for the answer to a request that
// asked for runs (retry, trigger, backfill): they are recorded, and wait
// until the job is resumed. A failed read of the pause flag answers false
// (the field left out) rather than fail an answer whose request is done
// and which the client might repeat.
func (h *adminHandler) paused(r *http.Request, job string) bool {
	paused, _ := h.s.Paused(r.Context(), job)
	return paused
}

// needPartition answers 400 for a request that names no partition (the
// default partition "") of a job registered with partitions: one slot is
// one partition's, so the request is incomplete, not of an unknown
// partition (404 is for a partition the job does not have).
func (h *adminHandler) needPartition(job, partition string) error {
	if partition != "" {
		return nil
	}
	for _, info := range h.s.Jobs() {
		if info.Name == job && !slices.Contains(info.Partitions, "") {
			return &problemError{kind: "partition-required", field: "partition",
				err: fmt.Errorf("%w: partition is required for a partitioned job", errBadRequest)}
		}
	}
	return nil
}

func (h *adminHandler) pause(w http.ResponseWriter, r *http.Request) error {
	if err := decodeEmpty(r); err != nil {
		return err
	}
	if err := h.s.Pause(r.Context(), r.PathValue("job")); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, PausedResponse{Job: r.PathValue("job"), Paused: true})
}

func (h *adminHandler) resume(w http.ResponseWriter, r *http.Request) error {
	var req ResumeRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := h.s.Resume(r.Context(), r.PathValue("job"), req.SkipPaused); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, PausedResponse{Job: r.PathValue("job"), Paused: false})
}

// leases serves GET /leases?match=GLOB&limit=N from Options.Leases.
func (h *adminHandler) leases(w http.ResponseWriter, r *http.Request) error {
	if h.cfg.Leases == nil {
		return &problemError{kind: "no-lease-inspector", err: fmt.Errorf("%w: no lease inspector configured", errNotFound)}
	}
	q := r.URL.Query()
	limit, err := parseLimit(q.Get("limit"))
	if err != nil {
		return err
	}
	match := q.Get("match")
	if _, err := path.Match(match, ""); err != nil {
		return badField("match", "%s: %v", echo(match), err)
	}
	infos, err := h.cfg.Leases.List(r.Context(), match, limit)
	if err != nil {
		return err
	}
	page := LeasesPage{Leases: []LeaseJSON{}}
	for _, in := range infos {
		page.Leases = append(page.Leases, leaseJSON(in))
	}
	return writeJSON(w, http.StatusOK, page)
}

// parseLimit reads a limit parameter: DefaultLimit when empty, else 1 to
// MaxLimit.
func parseLimit(v string) (int, error) {
	if v == "" {
		return DefaultLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > MaxLimit {
		return 0, badField("limit", "want 1 to %d", MaxLimit)
	}
	return n, nil
}

// parseTime reads an RFC 3339 parameter.
func parseTime(name, v string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, badField(name, "%s: want RFC 3339 (2026-12-05T02:00:00Z)", echo(v))
	}
	return t, nil
}
