package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/fence"
)

// resource is the fenced resource every settlement write goes through: the
// job's ledger of settlements, guarded by one token.
const resource = "daily-settlement"

// row is one settlement write as the sink saw it.
type row struct {
	Slot    time.Time   `json:"slot"`
	Replica string      `json:"replica"`
	Token   fence.Token `json:"token"`
	Current fence.Token `json:"current,omitempty"` // rejections: the token that won
}

// report is everything the sink knows: accepted rows and refused writes.
type report struct {
	Rows       []row `json:"rows"`
	Rejections []row `json:"rejections"`
}

// store is where settlements land. Write is fenced: it returns a
// *fence.StaleTokenError, and records the refusal, when h's token is stale
// for its scope (the job's lease).
type store interface {
	Write(ctx context.Context, slot time.Time, replica string, h fence.Holder) error
	Report(ctx context.Context) (report, error)
	// MaxToken is the highest token among accepted rows.
	MaxToken(ctx context.Context) (fence.Token, error)
	Close()
}

// memStore is the embedded sink: rows in memory, fenced with
// fence.Check, shared with the replica processes over loopback HTTP.
type memStore struct {
	unfenced bool

	mu       sync.Mutex
	current  fence.Token
	owner    string
	rep      report
	maxToken fence.Token
}

func (m *memStore) Write(_ context.Context, slot time.Time, replica string, h fence.Holder) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	token, owner := h.Token, h.Owner
	if !m.unfenced {
		// One fence: the demo has one job, so one lease and one scope.
		if err := h.Check(resource, m.current, m.owner); err != nil {
			m.rep.Rejections = append(m.rep.Rejections, row{Slot: slot, Replica: replica, Token: token, Current: m.current})
			return err
		}
		m.current, m.owner = token, owner
	}
	m.rep.Rows = append(m.rep.Rows, row{Slot: slot, Replica: replica, Token: token})
	m.maxToken = max(m.maxToken, token)
	return nil
}

func (m *memStore) Report(context.Context) (report, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := report{Rows: append([]row(nil), m.rep.Rows...), Rejections: append([]row(nil), m.rep.Rejections...)}
	return r, nil
}

func (m *memStore) MaxToken(context.Context) (fence.Token, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.maxToken, nil
}

func (m *memStore) Close() {}

// writeRequest is the body of POST /write.
type writeRequest struct {
	Slot    time.Time   `json:"slot"`
	Replica string      `json:"replica"`
	Token   fence.Token `json:"token"`
	Owner   string      `json:"owner"`
	Scope   string      `json:"scope"`
}

// handler serves a memStore to the replicas: POST /write answers 204, or
// 409 with the current token when the token is stale.
func (m *memStore) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /write", func(w http.ResponseWriter, r *http.Request) {
		var req writeRequest
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		err := m.Write(r.Context(), req.Slot, req.Replica, fence.Holder{Scope: req.Scope, Token: req.Token, Owner: req.Owner})
		var stale *fence.StaleTokenError
		switch {
		case errors.As(err, &stale):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(stale)
		case err != nil:
			http.Error(w, err.Error(), http.StatusBadRequest)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	})
	return mux
}

// httpStore is a replica's view of the embedded sink.
type httpStore struct {
	url    string
	client *http.Client
}

func (h *httpStore) Write(ctx context.Context, slot time.Time, replica string, holder fence.Holder) error {
	body, err := json.Marshal(writeRequest{Slot: slot, Replica: replica, Token: holder.Token, Owner: holder.Owner, Scope: holder.Scope})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url+"/write", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNoContent:
		return nil
	case http.StatusConflict:
		var stale fence.StaleTokenError
		if err := json.NewDecoder(resp.Body).Decode(&stale); err != nil {
			return fmt.Errorf("store: stale answer: %w", err)
		}
		return &stale
	default:
		return fmt.Errorf("store: write answered %s", resp.Status)
	}
}

func (h *httpStore) Report(context.Context) (report, error) {
	return report{}, errors.New("store: report is read by the coordinator only")
}

func (h *httpStore) MaxToken(context.Context) (fence.Token, error) {
	return 0, errors.New("store: max token is read by the coordinator only")
}

func (h *httpStore) Close() { h.client.CloseIdleConnections() }

// tally is the summary measured from a sink report.
type tally struct {
	slots, ranOnce, skipped, duplicates, missed, staleRejected int
	perSlot                                                    map[time.Time][]row
	// skippedBy is the ledger's reason for each slot it recorded skipped
	// by policy: it has no write, and none is due.
	skippedBy map[time.Time]string
}

// measure tallies the sink's rows per slot. skipped holds the slots
// without a row that the ledger recorded skipped, with its reason (the
// default overlap policy skips a slot that came due while a run of the job
// was still in progress, as after a takeover that catches up on several
// slots on a busy machine); every other slot without a row is missed.
func measure(rep report, slots []time.Time, skipped map[time.Time]string) tally {
	t := tally{slots: len(slots), perSlot: map[time.Time][]row{}, skippedBy: map[time.Time]string{}, staleRejected: len(rep.Rejections)}
	for _, r := range rep.Rows {
		t.perSlot[r.Slot.UTC()] = append(t.perSlot[r.Slot.UTC()], r)
	}
	for _, s := range slots {
		switch n := len(t.perSlot[s]); {
		case n == 0 && skipped[s] != "":
			t.skipped++
			t.skippedBy[s] = skipped[s]
		case n == 0:
			t.missed++
		case n == 1:
			t.ranOnce++
		default:
			t.duplicates += n - 1
		}
	}
	return t
}

func sortRows(rows []row) {
	sort.Slice(rows, func(i, j int) bool {
		if !rows[i].Slot.Equal(rows[j].Slot) {
			return rows[i].Slot.Before(rows[j].Slot)
		}
		return rows[i].Token < rows[j].Token
	})
}
