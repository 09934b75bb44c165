package httpfencetest

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore"
	"github.com/holdfast-go/holdfast/sinks/httpfence/internal/storeutil"
)

// MemoryStore is a Store in process memory, for tests and examples: it is
// lost on restart and not shared between replicas, so it gives none of the
// guarantees of the package across processes. Expired records are dropped
// lazily, when their key is used again. Safe for concurrent use.
type MemoryStore struct {
	mu      sync.Mutex
	now     func() time.Time
	records map[string]*memRecord
}

type memRecord struct {
	fingerprint string
	lock        string // "" once completed
	resp        *idemstore.Response
	expires     time.Time
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{now: time.Now, records: map[string]*memRecord{}}
}

// Begin implements idemstore.Store.
func (s *MemoryStore) Begin(ctx context.Context, key, fingerprint string, lockTTL time.Duration) (idemstore.Outcome, error) {
	if ctx == nil {
		return idemstore.Outcome{}, nilContext("Begin")
	}
	if err := storeutil.ValidTTL("lock TTL", lockTTL); err != nil {
		return idemstore.Outcome{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if r, ok := s.records[key]; ok && now.Before(r.expires) {
		switch {
		case r.fingerprint != fingerprint:
			return idemstore.Outcome{State: idemstore.StateMismatch}, nil
		case r.lock != "":
			return idemstore.Outcome{State: idemstore.StateInFlight, LockLeft: max(r.expires.Sub(now), time.Millisecond)}, nil
		}
		return idemstore.Outcome{State: idemstore.StateCompleted, Response: cloneResponse(r.resp)}, nil
	}
	lock, err := storeutil.NewLock()
	if err != nil {
		return idemstore.Outcome{}, err
	}
	s.records[key] = &memRecord{fingerprint: fingerprint, lock: lock, expires: now.Add(lockTTL)}
	return idemstore.Outcome{State: idemstore.StateNew, Lock: lock}, nil
}

// Complete implements idemstore.Store.
func (s *MemoryStore) Complete(ctx context.Context, key, lock string, resp *idemstore.Response, ttl time.Duration) error {
	if ctx == nil {
		return nilContext("Complete")
	}
	if err := storeutil.ValidTTL("TTL", ttl); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.held(key, lock)
	if err != nil {
		return err
	}
	r.lock, r.resp, r.expires = "", cloneResponse(resp), s.now().Add(ttl)
	return nil
}

// Abandon implements idemstore.Store.
func (s *MemoryStore) Abandon(ctx context.Context, key, lock string) error {
	if ctx == nil {
		return nilContext("Abandon")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.held(key, lock); err != nil {
		return err
	}
	delete(s.records, key)
	return nil
}

// held returns the live in-flight record of key under lock.
func (s *MemoryStore) held(key, lock string) (*memRecord, error) {
	r, ok := s.records[key]
	if !ok || r.lock == "" || r.lock != lock || !s.now().Before(r.expires) {
		return nil, fmt.Errorf("%w: key %q", idemstore.ErrLockLost, key)
	}
	return r, nil
}

func cloneResponse(r *idemstore.Response) *idemstore.Response {
	if r == nil {
		return &idemstore.Response{}
	}
	return &idemstore.Response{Status: r.Status, Header: r.Header.Clone(), Body: bytes.Clone(r.Body)}
}

// MemoryFence is a idemstore.FenceStore in process memory, for tests and examples:
// one fence per (resource, scope), and, as a fence.SlotScopePruner, a
// watermark per (resource, unit) below which slot scopes are closed. Its
// clock is the process's (time.Now). Safe for concurrent use.
type MemoryFence struct {
	mu     sync.Mutex
	seen   map[memFence]memToken
	closed map[memUnit]int64 // PruneSlotScopes' watermarks, unix seconds
	margin time.Duration     // of a prune cutoff (SetPruneMargin); 0: fence.PruneMargin
}

type memFence struct{ resource, scope string }

type memUnit struct{ resource, unit string }

type memToken struct {
	token fence.Token
	owner string
}

// NewMemoryFence returns an empty MemoryFence.
func NewMemoryFence() *MemoryFence {
	return &MemoryFence{seen: map[memFence]memToken{}, closed: map[memUnit]int64{}, margin: fence.PruneMargin}
}

// SetPruneMargin sets how far behind time.Now a cutoff of PruneSlotScopes
// must be: fence.PruneMargin (1 h) by default, as on every store real
// schedulers share. A test or simulation whose runs last minutes shortens
// it, to prune the slots it is done with; d <= 0 keeps the default.
func (f *MemoryFence) SetPruneMargin(d time.Duration) {
	if d <= 0 {
		d = fence.PruneMargin
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.margin = d
}

// Accept implements idemstore.FenceStore. A slot scope
// (fence.SplitSlotScope) below its unit's watermark is refused, whatever
// its token, with fence.ClosedScopeError.
func (f *MemoryFence) Accept(_ context.Context, resource string, h fence.Holder) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if unit, slot, ok := fence.SplitSlotScope(h.Scope); ok && h.Token != fence.None {
		if w, ok := f.closed[memUnit{resource, unit}]; ok && slot < w {
			return fence.ClosedScopeError(resource, h, w)
		}
	}
	k := memFence{resource, h.Scope}
	cur := f.seen[k]
	if err := h.Check(resource, cur.token, cur.owner); err != nil {
		return err
	}
	f.seen[k] = memToken{token: h.Token, owner: h.Owner}
	return nil
}

// PruneSlotScopes implements fence.SlotScopePruner, the reference of
// httpfence's stores: it raises the watermark of (resource, unit) to
// before.Unix() (never lowered) and deletes the fences of unit's slot
// scopes for resource below it, returning how many it deleted. It returns
// an error matching httpfence.ErrInvalidOptions for an empty resource or
// unit, and one matching idemstore.ErrNilContext for a nil ctx.
//
// A before later than time.Now minus fence.PruneMargin (1 hour;
// SetPruneMargin's) is refused with nothing changed, as the stores refuse
// it on their own clocks: the error wraps a *fence.PruneCutoffError
// (errors.As) and matches fence.ErrPruneCutoff (errors.Is).
func (f *MemoryFence) PruneSlotScopes(ctx context.Context, resource, unit string, before time.Time) (int, error) {
	switch {
	case ctx == nil:
		return 0, fmt.Errorf("MemoryFence.PruneSlotScopes: %w", idemstore.ErrNilContext)
	case ctx.Err() != nil:
		return 0, context.Cause(ctx)
	case resource == "" || unit == "":
		return 0, fmt.Errorf("%w: MemoryFence.PruneSlotScopes: empty resource or unit", httpfence.ErrInvalidOptions)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	margin := f.margin
	if margin <= 0 { // a MemoryFence not made by NewMemoryFence
		margin = fence.PruneMargin
	}
	if err := fence.CheckPruneCutoffMargin(before, time.Now(), margin); err != nil {
		return 0, fmt.Errorf("MemoryFence.PruneSlotScopes of %q: %w", resource, err)
	}
	u := memUnit{resource, unit}
	w, ok := f.closed[u]
	if b := before.Unix(); !ok || b > w {
		w = b
		if f.closed == nil {
			f.closed = map[memUnit]int64{}
		}
		f.closed[u] = w
	}
	n := 0
	for k := range f.seen {
		if k.resource != resource {
			continue
		}
		if un, slot, ok := fence.SplitSlotScope(k.scope); ok && un == unit && slot < w {
			delete(f.seen, k)
			n++
		}
	}
	return n, nil
}

// nilContext is the error of method op called with a nil context.
func nilContext(op string) error {
	return fmt.Errorf("httpfence: MemoryStore.%s: %w", op, idemstore.ErrNilContext)
}
