package sim

import (
	"context"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/ledgertest"
)

// ledgerStore is the simulated ledger store: a ledgertest.Memory (it
// passes ledgertest.Exercise) that can restart without its data, in
// front of which every replica has a ledgerView over its own link. It
// tells the checker of every transition, under one lock with the call,
// so the checker sees each record's statuses in the order they were
// written.
type ledgerStore struct {
	mut mutation
	chk *checker

	mu   sync.Mutex
	mem  *ledgertest.Memory
	down bool
	// horizons holds each pair's first horizon, which State shows for
	// ever, and hidden the pairs with no slot begun since the last loss
	// (for the mutation resetUnrecorded only).
	horizons map[[2]string]time.Time
	hidden   map[[2]string]time.Time // the pair's seeded last slot (zero until its first read)
}

func newLedgerStore(mut mutation, chk *checker) *ledgerStore {
	return &ledgerStore{mut: mut, chk: chk, mem: newMemory(),
		horizons: map[[2]string]time.Time{}, hidden: map[[2]string]time.Time{}}
}

// pruneMargin is how old the operator's prune cutoffs are (op_prune):
// a minute, where real ledgers want ledger.PruneMargin (an hour), so that
// runs of a few simulated minutes prune what they checked already (Grace).
const pruneMargin = time.Minute

// newMemory returns an empty ledger that takes the operator's prunes.
func newMemory() *ledgertest.Memory {
	m := ledgertest.NewMemory()
	m.SetPruneMargin(pruneMargin)
	return m
}

// crash takes the store down (every call fails) and loses its data.
func (s *ledgerStore) crash() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = true
	s.mem = newMemory()
	s.chk.ledgerLost()
	if s.mut.has(resetUnrecorded) {
		for pair := range s.horizons {
			s.hidden[pair] = time.Time{}
		}
	}
}

// disguise is the planted bug resetUnrecorded: st, read at now, as a store
// that hides its loss answers it. s.mu is held.
func (s *ledgerStore) disguise(job, partition string, st ledger.State, now time.Time) ledger.State {
	pair := [2]string{job, partition}
	if h, ok := s.horizons[pair]; ok {
		st.Horizon = h // the first horizon, for ever: a loss never shows
	} else {
		s.horizons[pair] = st.Horizon
	}
	seed, hiding := s.hidden[pair]
	switch {
	case !hiding:
	case !st.Last.IsZero():
		delete(s.hidden, pair) // a slot was begun since: its last is real
	case seed.IsZero():
		st.Last = now.Truncate(time.Second)
		s.hidden[pair] = st.Last
	default:
		st.Last = seed
	}
	return st
}

// up brings a crashed store back, empty.
func (s *ledgerStore) up() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = false
}

// do runs op on the current memory under the store's lock.
func (s *ledgerStore) do(op func(m *ledgertest.Memory) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return errLink
	}
	return op(s.mem)
}

// after tells the checker of slot's record once op wrote it. s.mu is held.
func (s *ledgerStore) after(ctx context.Context, m *ledgertest.Memory, slot ledger.Slot, op string) {
	rec, found, err := m.Get(ctx, slot)
	if err != nil || !found {
		return
	}
	s.chk.ledgerWrote(op, rec)
}

// ledgerView is one replica's ledger: the store over the replica's link.
type ledgerView struct {
	s *ledgerStore
	p *proc
}

var _ ledger.Ledger = (*ledgerView)(nil)

func (v *ledgerView) call(ctx context.Context, op func(m *ledgertest.Memory) error) error {
	return v.p.call(ctx, "ledger", func() error { return v.s.do(op) })
}

func (v *ledgerView) State(ctx context.Context, job, partition string, since, now time.Time) (st ledger.State, err error) {
	err = v.call(ctx, func(m *ledgertest.Memory) error {
		var e error
		st, e = m.State(ctx, job, partition, since, now)
		if e == nil && v.s.mut.has(resetUnrecorded) {
			st = v.s.disguise(job, partition, st, now)
		}
		return e
	})
	return st, err
}

func (v *ledgerView) Begin(ctx context.Context, slot ledger.Slot, f ledger.Fence, maxAttempts int, now time.Time) (attempt, left int, err error) {
	err = v.call(ctx, func(m *ledgertest.Memory) error {
		var e error
		attempt, left, e = m.Begin(ctx, slot, f, maxAttempts, now)
		if e == nil {
			v.s.after(ctx, m, slot, "begin")
		}
		return e
	})
	return attempt, left, err
}

func (v *ledgerView) Heartbeat(ctx context.Context, slot ledger.Slot, f ledger.Fence, attempt int, now time.Time) error {
	return v.call(ctx, func(m *ledgertest.Memory) error { return m.Heartbeat(ctx, slot, f, attempt, now) })
}

func (v *ledgerView) Finish(ctx context.Context, slot ledger.Slot, f ledger.Fence, attempt int, o ledger.Outcome, now time.Time) error {
	return v.call(ctx, func(m *ledgertest.Memory) error {
		e := m.Finish(ctx, slot, f, attempt, o, now)
		if e == nil {
			v.s.after(ctx, m, slot, "finish")
		}
		return e
	})
}

func (v *ledgerView) Skip(ctx context.Context, slot ledger.Slot, f ledger.Fence, status ledger.Status, reason string, now time.Time) error {
	return v.call(ctx, func(m *ledgertest.Memory) error {
		e := m.Skip(ctx, slot, f, status, reason, now)
		if e == nil {
			v.s.after(ctx, m, slot, "skip")
		}
		return e
	})
}

func (v *ledgerView) Request(ctx context.Context, slot ledger.Slot, reason string, now time.Time) error {
	return v.call(ctx, func(m *ledgertest.Memory) error {
		e := m.Request(ctx, slot, reason, now)
		if e == nil {
			v.s.after(ctx, m, slot, "request")
		}
		return e
	})
}

func (v *ledgerView) SetPaused(ctx context.Context, job string, paused bool) error {
	return v.call(ctx, func(m *ledgertest.Memory) error { return m.SetPaused(ctx, job, paused) })
}

func (v *ledgerView) Get(ctx context.Context, slot ledger.Slot) (rec ledger.Record, found bool, err error) {
	err = v.call(ctx, func(m *ledgertest.Memory) error {
		var e error
		rec, found, e = m.Get(ctx, slot)
		return e
	})
	return rec, found, err
}

func (v *ledgerView) List(ctx context.Context, job, partition string, from, to time.Time, limit int) (recs []ledger.Record, err error) {
	err = v.call(ctx, func(m *ledgertest.Memory) error {
		var e error
		recs, e = m.List(ctx, job, partition, from, to, limit)
		return e
	})
	return recs, err
}
