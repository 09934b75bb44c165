package sim

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
)

// leaseStore is the simulated lease store: lease/leasetest.MemoryBackend's
// contract (it passes leasedrivertest.Exercise, see leasestore_test.go)
// plus what a Redis store can suffer: a restart that loses every key, and
// the eviction of one lease's keys. Its tokens follow the design's rule,
// max(counter+1, store time in µs), so a lost counter resumes above every
// token issued before (unless the mutation timeFloorOff removes the floor).
// Its time is the process's (the synctest bubble's) clock.
type leaseStore struct {
	mut mutation // planted bugs (mutations.go)
	chk *checker // told of every grant; nil in the conformance test

	mu      sync.Mutex
	isDown  bool // restarting: every call fails
	leases  map[string]storedLease
	counter map[string]fence.Token
	waiters map[string]map[chan struct{}]struct{}
	// evicted remembers, per name, the owner whose key an eviction took
	// (for the mutation evictedNotSignalled only).
	evicted map[string]string
	// last is the store's clock at its latest grant: the store's time
	// moves at least 1 µs per command, as a real store's does, while the
	// bubble's clock stands still between events.
	last time.Time
}

type storedLease struct {
	owner   string
	expires time.Time
}

func newLeaseStore(mut mutation, chk *checker) *leaseStore {
	return &leaseStore{mut: mut, chk: chk, leases: map[string]storedLease{},
		counter: map[string]fence.Token{}, waiters: map[string]map[chan struct{}]struct{}{},
		evicted: map[string]string{}}
}

var (
	_ leasedriver.Backend  = (*leaseStore)(nil)
	_ leasedriver.Notifier = (*leaseStore)(nil)
)

// live returns name's record if its TTL has not passed. s.mu is held.
func (s *leaseStore) live(name string, now time.Time) (storedLease, bool) {
	l, ok := s.leases[name]
	if ok && !now.Before(l.expires) {
		delete(s.leases, name)
		return storedLease{}, false
	}
	return l, ok
}

// Acquire implements leasedriver.Backend.
func (s *leaseStore) Acquire(ctx context.Context, name, owner string, ttl time.Duration) (leasedriver.Grant, error) {
	if err := ctx.Err(); err != nil {
		return leasedriver.Grant{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isDown {
		return leasedriver.Grant{}, errLink
	}
	now := time.Now()
	if l, ok := s.live(name, now); ok {
		return leasedriver.Grant{Remaining: l.expires.Sub(now)}, nil
	}
	if !now.After(s.last) {
		now = s.last.Add(time.Microsecond)
	}
	s.last = now
	tok := s.counter[name] + 1
	if floor := fence.Token(now.UnixMicro()); !s.mut.has(timeFloorOff) && floor > tok {
		tok = floor
	}
	s.counter[name] = tok
	s.leases[name] = storedLease{owner: owner, expires: now.Add(ttl)}
	if !s.mut.has(evictedNotSignalled) {
		delete(s.evicted, name)
	}
	if s.chk != nil {
		s.chk.granted(name, tok)
	}
	return leasedriver.Grant{Acquired: true, Token: tok}, nil
}

// Renew implements leasedriver.Backend: it extends a lease still held by
// its owner and never re-creates one.
func (s *leaseStore) Renew(ctx context.Context, batch []leasedriver.Held) []error {
	errs := make([]error, len(batch))
	if err := ctx.Err(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	for i, h := range batch {
		if s.isDown {
			errs[i] = errLink
			continue
		}
		l, ok := s.live(h.Name, now)
		if (!ok || l.owner != h.Owner) && s.mut.has(evictedNotSignalled) && s.evicted[h.Name] == h.Owner {
			continue // the planted bug: an evicted key answers renewals as held
		}
		if !ok || l.owner != h.Owner {
			errs[i] = fmt.Errorf("sim: renew %q: %w", h.Name, leasedriver.ErrNotHeld)
			continue
		}
		l.expires = now.Add(h.TTL)
		s.leases[h.Name] = l
	}
	return errs
}

// Release implements leasedriver.Backend.
func (s *leaseStore) Release(ctx context.Context, h leasedriver.Held) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.isDown {
		return errLink
	}
	l, ok := s.live(h.Name, time.Now())
	if !ok || l.owner != h.Owner {
		return fmt.Errorf("sim: release %q: %w", h.Name, leasedriver.ErrNotHeld)
	}
	s.free(h.Name)
	return nil
}

// Released implements leasedriver.Notifier.
func (s *leaseStore) Released(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waiters[name] == nil {
		s.waiters[name] = map[chan struct{}]struct{}{}
	}
	s.waiters[name][ch] = struct{}{}
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.waiters[name], ch)
		if len(s.waiters[name]) == 0 {
			delete(s.waiters, name)
		}
	}, nil
}

// free deletes name's record and wakes its waiters. s.mu is held.
func (s *leaseStore) free(name string) {
	delete(s.leases, name)
	for ch := range s.waiters[name] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// expire frees name at once, whoever holds it (the conformance suite's
// Expire).
func (s *leaseStore) expire(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.leases[name]; ok {
		s.free(name)
	}
}

// evict drops name's keys, lease and counter, as a Redis under
// maxmemory pressure would; it reports whether there was a lease.
func (s *leaseStore) evict(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.live(name, time.Now())
	if ok {
		s.evicted[name] = l.owner
	}
	delete(s.leases, name) // an eviction wakes nobody
	delete(s.counter, name)
	return ok
}

// restart loses every key, as a Redis restarted without persistence.
func (s *leaseStore) restart() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, l := range s.leases {
		s.evicted[n] = l.owner
	}
	s.leases = map[string]storedLease{}
	s.counter = map[string]fence.Token{}
}

// holds reports whether owner holds name now.
func (s *leaseStore) holds(name, owner string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.live(name, time.Now())
	return ok && l.owner == owner
}

// down takes the store down (every call fails) or brings it back.
func (s *leaseStore) down(d bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.isDown = d
}
