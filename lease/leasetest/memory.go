package leasetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
)

// MemoryBackend is a leasedriver.Backend in memory, for unit tests of code that
// holds leases: no Redis, no network, the whole contract (it passes
// Exercise). A lease is held until its TTL passes on the backend's clock,
// tokens strictly increase per name (1, 2, 3, ...: never reused, also
// across expiry and release), and a release wakes the waiters of a
// blocked Client.Acquire (leasedriver.Notifier). Clients sharing one
// MemoryBackend compete for its leases as replicas do over one Redis.
//
// Give it a clock.Fake to expire leases by moving time (Fake.Advance), or
// call Expire. The Client's own timers (renewal, trust window) follow the
// real clock whatever the backend's: with a fake clock, a lease the
// Client keeps alive expires only when the fake clock passes its TTL
// between two renewals. The zero value is not ready: use
// NewMemoryBackend. It is safe for concurrent use.
//
// WithHolder returns a view of the same leases that stores a holder label
// (lease.Options.Holder) with each acquisition, read back by Label: give
// each replica's Client its own view.
type MemoryBackend struct {
	*memoryLeases
	label string // the holder label this view stores (WithHolder)
}

// memoryLeases is what the views of one MemoryBackend share.
type memoryLeases struct {
	clk   clock.Clock
	calls atomic.Int64

	mu      sync.Mutex
	leases  map[string]memoryLease
	tokens  map[string]fence.Token
	waiters map[string]map[chan struct{}]struct{}
}

// memoryLease is the stored record of a held lease.
type memoryLease struct {
	owner   string
	holder  string // the holder label
	expires time.Time
}

var (
	_ leasedriver.Backend  = (*MemoryBackend)(nil)
	_ leasedriver.Notifier = (*MemoryBackend)(nil)
	_ leasedriver.Labeled  = (*MemoryBackend)(nil)
)

// NewMemoryBackend returns an empty MemoryBackend whose TTLs run on clk
// (clock.Real() when nil).
func NewMemoryBackend(clk clock.Clock) *MemoryBackend {
	if clk == nil {
		clk = clock.Real()
	}
	return &MemoryBackend{memoryLeases: &memoryLeases{
		clk:     clk,
		leases:  map[string]memoryLease{},
		tokens:  map[string]fence.Token{},
		waiters: map[string]map[chan struct{}]struct{}{},
	}}
}

// WithHolder returns a view of m's leases (the same leases, tokens and
// waiters) whose acquisitions store the holder label label, as
// redislease.Options.Holder does: pass it to lease.NewWithBackend. It
// returns an error matching lease.ErrInvalidOptions for a label
// leasedriver.CheckHolder refuses.
func (m *MemoryBackend) WithHolder(label string) (*MemoryBackend, error) {
	if err := leasedriver.CheckHolder(label); err != nil {
		return nil, err
	}
	return &MemoryBackend{memoryLeases: m.memoryLeases, label: label}, nil
}

// HolderLabel implements leasedriver.Labeled: the label of WithHolder, "" for
// NewMemoryBackend's.
func (m *MemoryBackend) HolderLabel() string { return m.label }

// Acquire takes the lease called name for owner and ttl if it is free or
// its TTL passed, with the next token of name; otherwise it returns
// Grant{Acquired: false} with the holder's remaining TTL. It fails only
// when ctx has ended.
func (m *MemoryBackend) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (leasedriver.Grant, error) {
	m.calls.Add(1)
	if err := ctx.Err(); err != nil {
		return leasedriver.Grant{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clk.Now()
	if l, ok := m.live(name, now); ok {
		return leasedriver.Grant{Remaining: l.expires.Sub(now)}, nil
	}
	m.tokens[name]++
	m.leases[name] = memoryLease{owner: owner, holder: m.label, expires: now.Add(ttl)}
	return leasedriver.Grant{Acquired: true, Token: m.tokens[name]}, nil
}

// Renew extends each lease of batch by its TTL from now if it still holds
// its owner and its TTL has not passed; lease.ErrNotHeld otherwise.
func (m *MemoryBackend) Renew(ctx context.Context, batch []leasedriver.Held) []error {
	m.calls.Add(1)
	errs := make([]error, len(batch))
	if err := ctx.Err(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clk.Now()
	for i, h := range batch {
		l, ok := m.live(h.Name, now)
		if !ok || l.owner != h.Owner {
			errs[i] = fmt.Errorf("leasetest: renew %q: %w", h.Name, lease.ErrNotHeld)
			continue
		}
		l.expires = now.Add(h.TTL)
		m.leases[h.Name] = l
	}
	return errs
}

// Release frees the lease if it still holds h's owner and its TTL has not
// passed, and wakes its waiters; lease.ErrNotHeld otherwise.
func (m *MemoryBackend) Release(ctx context.Context, h leasedriver.Held) error {
	m.calls.Add(1)
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.live(h.Name, m.clk.Now())
	if !ok || l.owner != h.Owner {
		return fmt.Errorf("leasetest: release %q: %w", h.Name, lease.ErrNotHeld)
	}
	m.free(h.Name)
	return nil
}

// Released returns a channel that receives when the lease called name is
// released (or expired with Expire), and a function to stop listening
// (leasedriver.Notifier). A lease whose TTL merely passes notifies nobody, as
// on Redis: waiters retry on the remaining TTL.
func (m *MemoryBackend) Released(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.waiters[name] == nil {
		m.waiters[name] = map[chan struct{}]struct{}{}
	}
	m.waiters[name][ch] = struct{}{}
	stop := func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.waiters[name], ch)
		if len(m.waiters[name]) == 0 {
			delete(m.waiters, name)
		}
	}
	return ch, stop, nil
}

// Expire frees the lease called name at once, whoever holds it, as its TTL
// running out would, and wakes its waiters: a new acquirer succeeds at
// once (with a larger token), and the holder, unless frozen (Freeze), is
// lost with lease.ErrNotHeld at its next renewal. Expiring a free lease
// does nothing.
func (m *MemoryBackend) Expire(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.leases[name]; ok {
		m.free(name)
	}
}

// Holder returns the owner holding the lease called name and its
// remaining TTL on the backend's clock; ("", 0) when it is free or its
// TTL passed.
func (m *MemoryBackend) Holder(name string) (owner string, ttl time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clk.Now()
	l, ok := m.live(name, now)
	if !ok {
		return "", 0
	}
	return l.owner, l.expires.Sub(now)
}

// Label returns the holder label stored with the lease called name, ""
// when it has none or is free.
func (m *MemoryBackend) Label(name string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, _ := m.live(name, m.clk.Now())
	return l.holder
}

// Calls returns how many calls of Acquire, Renew and Release the backend
// answered so far: the round trips a store would have seen (a batch Renew
// is one).
func (m *MemoryBackend) Calls() int64 { return m.calls.Load() }

// live returns the record of name if its TTL has not passed at now,
// deleting an expired one. m.mu is held.
func (m *MemoryBackend) live(name string, now time.Time) (memoryLease, bool) {
	l, ok := m.leases[name]
	if ok && !now.Before(l.expires) {
		delete(m.leases, name)
		return memoryLease{}, false
	}
	return l, ok
}

// free deletes the record of name and wakes its waiters. m.mu is held.
func (m *MemoryBackend) free(name string) {
	delete(m.leases, name)
	for ch := range m.waiters[name] {
		select {
		case ch <- struct{}{}:
		default: // already woken
		}
	}
}
