package ledgertest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// Memory is a ledger.Ledger in memory: the contract with nothing else in
// the way, and a fake for tests of code that uses a ledger. It meets
// Exercise, and implements ledger.Canceler (OverlapCancelOther) and
// ledger.Pruner. It is safe for concurrent use; the zero value is not
// ready, use NewMemory. Slot instants are kept at second precision, as the stores do.
type Memory struct {
	mu      sync.Mutex
	pairs   map[pairKey]*memPair
	paused  map[string]bool
	cancels map[pairKey]time.Time // the latest slot a RequestCancel named
	margin  time.Duration         // of a prune cutoff (SetPruneMargin)
}

var (
	_ ledger.Ledger         = (*Memory)(nil)
	_ ledger.Canceler       = (*Memory)(nil)
	_ ledger.Pruner         = (*Memory)(nil)
	_ ledger.PrunePreviewer = (*Memory)(nil)
)

type pairKey struct{ job, partition string }

// memPair is one (job, partition): its fence, horizon, latest slot, runs.
type memPair struct {
	fences  map[string]*scopeFence // by scope: the unit's and its slots' (ledger.Fence)
	horizon time.Time
	last    time.Time
	pruned  time.Time         // the latest cutoff of Prune (State.Pruned)
	runs    map[int64]*memRun // by slot, unix seconds
}

type memRun struct {
	rec   ledger.Record
	base  int // attempts before the last Request
	owner string
	token fence.Token
}

// NewMemory returns an empty Memory ledger.
func NewMemory() *Memory {
	return &Memory{pairs: map[pairKey]*memPair{}, paused: map[string]bool{}, cancels: map[pairKey]time.Time{}, margin: ledger.PruneMargin}
}

// SetPruneMargin sets how far behind time.Now a cutoff of Prune and
// PrunePreview must be: ledger.PruneMargin (1 h) by default, as on every
// ledger real schedulers share. A simulation whose runs last minutes (package
// sim) shortens it, to prune the slots it has checked already; d <= 0
// keeps the default.
func (m *Memory) SetPruneMargin(d time.Duration) {
	if d <= 0 {
		d = ledger.PruneMargin
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.margin = d
}

// checkCutoff is ledger.CheckPruneCutoffMargin with m's margin.
func (m *Memory) checkCutoff(before time.Time) error {
	m.mu.Lock()
	margin := m.margin
	m.mu.Unlock()
	return ledger.CheckPruneCutoffMargin(before, time.Now(), margin)
}

// pair returns the pair of (job, partition), creating it (and starting its
// horizon: the caller's now, truncated to the second) on first use.
func (m *Memory) pair(job, partition string, now time.Time) *memPair {
	k := pairKey{job, partition}
	p := m.pairs[k]
	if p == nil {
		p = &memPair{horizon: now.UTC().Truncate(time.Second), runs: map[int64]*memRun{}, fences: map[string]*scopeFence{}}
		m.pairs[k] = p
	}
	return p
}

type scopeFence struct {
	token fence.Token
	owner string
}

// raise applies the acceptance rule to the fence of f's scope (after
// f.Planner's, on the unit's fence, when set) and raises it. Nothing is
// raised unless both accept.
func (p *memPair) raise(slot ledger.Slot, f ledger.Fence) error {
	slotScoped, err := f.Check(slot)
	if err != nil {
		return fmt.Errorf("ledgertest: %w", err)
	}
	if slotScoped && p.fences[f.Scope] == nil && slot.At.Before(p.pruned) {
		// A slot before the prune cutoff without its fence: Prune took
		// both its record and its fence, and the slot is closed (see
		// ledger.Pruner).
		return fmt.Errorf("ledgertest: %w", &fence.StaleTokenError{Resource: "ledger:" + f.Scope, Scope: f.Scope, Presented: f.Token})
	}
	holders := []ledger.Fence{f}
	if f.Planner != nil {
		holders = []ledger.Fence{*f.Planner, f}
	}
	resource := "ledger:" + ledger.UnitScope(slot.Job, slot.Partition)
	for _, h := range holders {
		cur := p.fences[h.Scope]
		if cur == nil {
			cur = &scopeFence{}
		}
		err := fence.Holder{Scope: h.Scope, Token: h.Token, Owner: h.Owner}.Check(resource, cur.token, cur.owner)
		if err != nil {
			return fmt.Errorf("ledgertest: %w", err)
		}
	}
	for _, h := range holders {
		p.fences[h.Scope] = &scopeFence{token: h.Token, owner: h.Owner}
	}
	return nil
}

func slotKey(t time.Time) int64 { return t.Unix() }

// State implements ledger.Ledger.
func (m *Memory) State(ctx context.Context, job, partition string, since, now time.Time) (ledger.State, error) {
	if ctx == nil {
		return ledger.State{}, nilContext("State")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.pair(job, partition, now)
	st := ledger.State{Last: p.last, Horizon: p.horizon, Paused: m.paused[job], Pruned: p.pruned}
	for _, r := range p.runs {
		if r.rec.Status != ledger.StatusPending && r.rec.Status != ledger.StatusRunning && r.rec.Slot.At.Before(since) &&
			(r.rec.Status != ledger.StatusFailed || r.rec.RetryAt.Before(since)) {
			continue
		}
		switch {
		case r.rec.Status == ledger.StatusPending, r.rec.Status == ledger.StatusRunning:
			st.Open = append(st.Open, ledger.OpenSlot{At: r.rec.Slot.At})
		case r.rec.Status == ledger.StatusFailed && !r.rec.RetryAt.IsZero():
			st.Open = append(st.Open, ledger.OpenSlot{At: r.rec.Slot.At, RetryAt: r.rec.RetryAt})
		}
	}
	slices.SortFunc(st.Open, func(a, b ledger.OpenSlot) int { return a.At.Compare(b.At) })
	return st, nil
}

// Begin implements ledger.Ledger, with the rules of pgledger.Ledger.Begin.
func (m *Memory) Begin(ctx context.Context, slot ledger.Slot, f ledger.Fence, maxAttempts int, now time.Time) (attempt, left int, err error) {
	if ctx == nil {
		return 0, 0, nilContext("Begin")
	}
	if maxAttempts < 1 {
		return 0, 0, fmt.Errorf("ledgertest: begin %s: maxAttempts %d, want at least 1", slot.Key(), maxAttempts)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.pair(slot.Job, slot.Partition, now)
	if err := p.raise(slot, f); err != nil {
		return 0, 0, err
	}
	at := slot.At.UTC().Truncate(time.Second)
	if at.After(p.last) {
		p.last = at
	}
	r := p.runs[slotKey(at)]
	if r == nil {
		r = &memRun{rec: ledger.Record{Slot: ledger.Slot{Job: slot.Job, At: at, Partition: slot.Partition}}}
		p.runs[slotKey(at)] = r
	}
	done := fmt.Errorf("ledgertest: begin %s: %w", slot.Key(), ledger.ErrSlotDone)
	switch r.rec.Status {
	case ledger.StatusSucceeded, ledger.StatusSkipped, ledger.StatusMissed:
		return 0, 0, done
	case ledger.StatusFailed:
		if r.rec.RetryAt.IsZero() {
			return 0, 0, done
		}
	case ledger.StatusRunning:
		if r.owner == f.Owner {
			return r.rec.Attempt, maxAttempts - (r.rec.Attempt - r.base), nil
		}
		a := &r.rec.Attempts[len(r.rec.Attempts)-1]
		a.Status, a.Class, a.Finished = ledger.StatusAbandoned, ledger.ClassInterrupted, now
	}
	if r.rec.Attempt-r.base >= maxAttempts {
		if r.rec.Status == ledger.StatusRunning {
			r.rec.Status = ledger.StatusAbandoned
		}
		r.rec.RetryAt = time.Time{}
		return 0, 0, done
	}
	r.rec.Attempt++
	r.rec.Status, r.rec.RetryAt, r.owner, r.token = ledger.StatusRunning, time.Time{}, f.Owner, f.Token
	r.rec.Attempts = append(r.rec.Attempts, ledger.Attempt{
		N: r.rec.Attempt, Token: f.Token, Owner: f.Owner, Holder: f.Holder, Status: ledger.StatusRunning, Started: now, Heartbeat: now,
	})
	return r.rec.Attempt, maxAttempts - (r.rec.Attempt - r.base), nil
}

// running returns the run of slot when attempt is its running attempt of
// f.Owner, and a *fence.StaleTokenError otherwise.
func (p *memPair) running(slot ledger.Slot, f ledger.Fence, attempt int) (*memRun, error) {
	r := p.runs[slotKey(slot.At)]
	if r == nil || r.rec.Status != ledger.StatusRunning || r.owner != f.Owner || r.rec.Attempt != attempt {
		cur := f.Token
		if r != nil && r.token != fence.None {
			cur = r.token
		}
		return nil, fmt.Errorf("ledgertest: attempt %d of %s is not running under owner id %s: %w",
			attempt, slot.Key(), fence.OwnerID(f.Owner), &fence.StaleTokenError{Resource: slot.Key(), Presented: f.Token, Current: cur})
	}
	return r, nil
}

// Heartbeat implements ledger.Ledger.
func (m *Memory) Heartbeat(ctx context.Context, slot ledger.Slot, f ledger.Fence, attempt int, now time.Time) error {
	if ctx == nil {
		return nilContext("Heartbeat")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.pair(slot.Job, slot.Partition, now)
	if err := p.raise(slot, f); err != nil {
		return err
	}
	r, err := p.running(slot, f, attempt)
	if err != nil {
		return err
	}
	r.rec.Attempts[len(r.rec.Attempts)-1].Heartbeat = now // the running one
	if slot.At.UTC().Truncate(time.Second).Before(m.cancels[pairKey{slot.Job, slot.Partition}]) {
		return ledger.ErrCancelRequested
	}
	return nil
}

// RequestCancel implements ledger.Canceler: the running attempt of an
// earlier slot of (job, partition) learns it at its next Heartbeat.
func (m *Memory) RequestCancel(ctx context.Context, job, partition string, slot time.Time) error {
	if ctx == nil {
		return nilContext("RequestCancel")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	k := pairKey{job, partition}
	if at := slot.UTC().Truncate(time.Second); at.After(m.cancels[k]) {
		m.cancels[k] = at
	}
	return nil
}

// Finish implements ledger.Ledger.
func (m *Memory) Finish(ctx context.Context, slot ledger.Slot, f ledger.Fence, attempt int, o ledger.Outcome, now time.Time) error {
	if ctx == nil {
		return nilContext("Finish")
	}
	if o.Status != ledger.StatusSucceeded && o.Status != ledger.StatusFailed {
		return fmt.Errorf("ledgertest: finish %s: outcome status %q", slot.Key(), o.Status)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.pair(slot.Job, slot.Partition, now)
	if err := p.raise(slot, f); err != nil {
		return err
	}
	r, err := p.running(slot, f, attempt)
	if err != nil {
		return err
	}
	if o.Status == ledger.StatusSucceeded {
		o = ledger.Outcome{Status: ledger.StatusSucceeded}
	}
	r.rec.Status, r.rec.RetryAt = o.Status, o.RetryAt
	if deferred(o) {
		r.base++ // not counted against the budget
	}
	a := &r.rec.Attempts[len(r.rec.Attempts)-1]
	a.Status, a.Class, a.Error, a.Finished = o.Status, o.Class, o.Error, now
	return nil
}

// Skip implements ledger.Ledger.
func (m *Memory) Skip(ctx context.Context, slot ledger.Slot, f ledger.Fence, status ledger.Status, reason string, now time.Time) error {
	if ctx == nil {
		return nilContext("Skip")
	}
	if status != ledger.StatusSkipped && status != ledger.StatusMissed {
		return fmt.Errorf("ledgertest: skip %s: status %q", slot.Key(), status)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.pair(slot.Job, slot.Partition, now)
	if err := p.raise(slot, f); err != nil {
		return err
	}
	at := slot.At.UTC().Truncate(time.Second)
	if p.runs[slotKey(at)] != nil {
		return nil
	}
	p.runs[slotKey(at)] = &memRun{
		rec:   ledger.Record{Slot: ledger.Slot{Job: slot.Job, At: at, Partition: slot.Partition}, Status: status, Reason: reason},
		owner: f.Owner, token: f.Token,
	}
	if at.After(p.last) {
		p.last = at
	}
	return nil
}

// Request implements ledger.Ledger.
func (m *Memory) Request(ctx context.Context, slot ledger.Slot, reason string, now time.Time) error {
	if ctx == nil {
		return nilContext("Request")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.pair(slot.Job, slot.Partition, now)
	at := slot.At.UTC().Truncate(time.Second)
	r := p.runs[slotKey(at)]
	switch {
	case r == nil:
		r = &memRun{rec: ledger.Record{Slot: ledger.Slot{Job: slot.Job, At: at, Partition: slot.Partition}}}
		p.runs[slotKey(at)] = r
	case r.rec.Status == ledger.StatusRunning:
		return fmt.Errorf("ledgertest: request %s: %w", slot.Key(), ledger.ErrSlotRunning)
	}
	r.rec.Status, r.rec.Reason, r.rec.RetryAt, r.base = ledger.StatusPending, reason, time.Time{}, r.rec.Attempt
	return nil
}

// Paused implements ledger.PauseReader.
func (m *Memory) Paused(ctx context.Context, job string) (bool, error) {
	if ctx == nil {
		return false, nilContext("Paused")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.paused[job], nil
}

// SetPaused implements ledger.Ledger.
func (m *Memory) SetPaused(ctx context.Context, job string, paused bool) error {
	if ctx == nil {
		return nilContext("SetPaused")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.paused[job] = paused
	return nil
}

// Get implements ledger.Ledger.
func (m *Memory) Get(ctx context.Context, slot ledger.Slot) (ledger.Record, bool, error) {
	if ctx == nil {
		return ledger.Record{}, false, nilContext("Get")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.pairs[pairKey{slot.Job, slot.Partition}]
	if p == nil {
		return ledger.Record{}, false, nil
	}
	r := p.runs[slotKey(slot.At)]
	if r == nil {
		return ledger.Record{}, false, nil
	}
	return r.copy(), true, nil
}

// List implements ledger.Ledger.
func (m *Memory) List(ctx context.Context, job, partition string, from, to time.Time, limit int) ([]ledger.Record, error) {
	if ctx == nil {
		return nil, nilContext("List")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	p := m.pairs[pairKey{job, partition}]
	if p == nil {
		return nil, nil
	}
	var recs []ledger.Record
	for _, r := range p.runs {
		if !r.rec.Slot.At.Before(from) && r.rec.Slot.At.Before(to) {
			recs = append(recs, r.copy())
		}
	}
	slices.SortFunc(recs, func(a, b ledger.Record) int { return cmp.Compare(b.Slot.At.Unix(), a.Slot.At.Unix()) })
	if len(recs) > limit {
		recs = recs[:max(limit, 0)]
	}
	return recs, nil
}

// copy returns the record with its own Attempts.
func (r *memRun) copy() ledger.Record {
	rec := r.rec
	rec.Attempts = slices.Clone(r.rec.Attempts)
	return rec
}

// Prune implements ledger.Pruner: it deletes the records of done slots
// before before (see isDone), except each pair's State.Last. Its store's
// clock is the process's wall clock (time.Now): a cutoff later than
// time.Now() minus ledger.PruneMargin (or SetPruneMargin's) is refused
// (*ledger.PruneCutoffError) with nothing changed.
func (m *Memory) Prune(ctx context.Context, before time.Time) (int64, error) {
	if ctx == nil {
		return 0, nilContext("Prune")
	}
	if err := m.checkCutoff(before); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var deleted int64
	for _, p := range m.pairs {
		if before.After(p.pruned) {
			p.pruned = before
		}
		for k, r := range p.runs {
			if r.rec.Slot.At.Before(before) && !r.rec.Slot.At.Equal(p.last) && isDone(r.rec) {
				delete(p.runs, k)
				delete(p.fences, ledger.SlotScope(r.rec.Slot)) // the slot is closed (raise)
				deleted++
			}
		}
	}
	return deleted, nil
}

// PrunePreview implements ledger.PrunePreviewer: the slots Prune would
// delete, oldest first, at most limit, and their count. It refuses a
// cutoff as Prune does.
func (m *Memory) PrunePreview(ctx context.Context, before time.Time, limit int) ([]ledger.Slot, int64, error) {
	if ctx == nil {
		return nil, 0, nilContext("PrunePreview")
	}
	if err := m.checkCutoff(before); err != nil {
		return nil, 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var all []ledger.Slot
	for _, p := range m.pairs {
		for _, r := range p.runs {
			if r.rec.Slot.At.Before(before) && !r.rec.Slot.At.Equal(p.last) && isDone(r.rec) {
				all = append(all, r.rec.Slot)
			}
		}
	}
	slices.SortFunc(all, func(a, b ledger.Slot) int { return a.At.Compare(b.At) })
	return all[:min(len(all), max(limit, 0))], int64(len(all)), nil
}

// isDone reports whether rec needs no further attempt, what ledger.Pruner
// may delete: succeeded, skipped, missed, abandoned, or failed with no
// retry time (final). Pending, running and retryable failures are open.
func isDone(rec ledger.Record) bool {
	switch rec.Status {
	case ledger.StatusSucceeded, ledger.StatusSkipped, ledger.StatusMissed, ledger.StatusAbandoned:
		return true
	case ledger.StatusFailed:
		return rec.RetryAt.IsZero()
	}
	return false
}

// nilContext is the error of method op called with a nil context.
func nilContext(op string) error { return fmt.Errorf("ledgertest: %s: %w", op, ledger.ErrNilContext) }

// deferred reports whether o is a deferral, which Finish does not count
// against the attempt budget: failed, ClassDeferred, with a retry time.
func deferred(o ledger.Outcome) bool {
	return o.Status == ledger.StatusFailed && o.Class == ledger.ClassDeferred && !o.RetryAt.IsZero()
}
