package leasedrivertest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/lease"
)

// Store is one check's lease store, as Exercise sees it: how to make
// Clients over it, and what the suite needs to reach behind their backs.
// NewClient and Expire are required; the other fields are optional, and
// the checks that need them are skipped without them.
type Store struct {
	// NewClient returns a new lease Client over the store. Clients of one
	// Store compete for the same leases, as replicas do. opts holds what
	// the check needs (RetryMin, RetryMax, Observer, Holder), zero elsewhere: the
	// store may add its own fields (Prefix, Logger) but must keep those.
	// Required. opts.Holder, when set, is the holder label the Client's
	// acquisitions must store (the store's backend option for it, such as
	// RedisOptions.Holder or pglease.Options.Holder).
	NewClient func(t *testing.T, opts lease.Options) *lease.Client
	// Expire frees the lease called name at once, whoever holds it, as
	// the store expiring it would: the holder finds out at its next
	// renewal. Required.
	Expire func(ctx context.Context, name string) error
	// Inspect returns the owner stored for the lease called name ("" when
	// free) and its remaining TTL. Optional: without it, the checks of
	// what is stored are left out.
	Inspect func(ctx context.Context, name string) (owner string, ttl time.Duration, err error)
	// HolderLabel returns the holder label stored with the held lease
	// called name ("" when none or free), as the store's views show it
	// (leasedriver.Info.Holder). Optional: without it,
	// HolderLabelIsStoredWithTheLease is skipped.
	HolderLabel func(ctx context.Context, name string) (string, error)
	// Commands returns how many commands the store's Clients sent so far.
	// Optional: without it, FailedTryIsOneCommand is skipped and bad input
	// is not checked to reach no server.
	Commands func() int64
	// NoReleaseNotification is true for a store that does not wake
	// waiters on release (its backend is no leasedriver.Notifier): waiters then
	// retry on the holder's remaining TTL, and WaiterIsWokenByRelease is
	// skipped.
	NoReleaseNotification bool
	// NoExpiry is true for a store whose TTLs do not run out by
	// themselves (miniredis without DriveClock): leases end only by
	// Expire, and UnrenewedLeaseIsFreedAfterItsTTL is skipped.
	NoExpiry bool
}

// Exercise runs the lease contract as parallel subtests of t, one per
// check (see the package documentation for the list). newStore is called
// once per check, with the check's t, and returns a fresh Store: its
// leases are the check's alone, and whatever it creates is released with
// t.Cleanup. A check that needs what the Store does not offer (Inspect,
// Commands, release notifications) is skipped with a message naming it;
// a newStore that skips (no server available) skips the check. It takes
// about as long as its slowest check: a few seconds.
func Exercise(t *testing.T, newStore func(t *testing.T) Store) {
	t.Helper()
	require.NotNil(t, newStore, "leasetest: Exercise: newStore is nil")
	for _, c := range contract {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			require.NotNil(t, s.NewClient, "leasetest: Store.NewClient is required")
			require.NotNil(t, s.Expire, "leasetest: Store.Expire is required")
			c.run(t, &env{Store: s})
		})
	}
}

// check is one clause of the contract.
type check struct {
	name string
	run  func(t *testing.T, e *env)
}

// env is the per-check bundle.
type env struct{ Store }

// client returns a new lease Client over the check's store.
func (e *env) client(t *testing.T, adjust ...func(*lease.Options)) *lease.Client {
	t.Helper()
	var opts lease.Options
	for _, f := range adjust {
		f(&opts)
	}
	c := e.NewClient(t, opts)
	require.NotNil(t, c, "Store.NewClient returned nil")
	return c
}

// owner returns the stored owner of name, and false when the Store cannot
// tell.
func (e *env) owner(t *testing.T, name string) (string, bool) {
	t.Helper()
	if e.Inspect == nil {
		return "", false
	}
	owner, _, err := e.Inspect(context.Background(), name)
	require.NoError(t, err)
	return owner, true
}

// requireOwner checks the stored owner of name when the Store can tell.
func (e *env) requireOwner(t *testing.T, name, want, msg string) {
	t.Helper()
	if got, ok := e.owner(t, name); ok {
		require.Equal(t, want, got, msg)
	}
}

// held registers l for release when the check ends (Release is idempotent;
// it also stops a lost lease's keep-alive), so that no goroutine outlives a
// failed check, and returns it.
func held(t *testing.T, l *lease.Lease) *lease.Lease {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = l.Release(ctx)
	})
	return l
}

// acquireCounter is a lease.Observer counting attempts by outcome, and
// passing every measurement on to next, if any.
type acquireCounter struct {
	next lease.Observer
	mu   sync.Mutex
	n    map[string]int // by outcome: acquired, held, other
}

func (o *acquireCounter) ObserveAcquire(name string, err error, took time.Duration) {
	outcome := "other"
	switch {
	case err == nil:
		outcome = "acquired"
	case errors.Is(err, lease.ErrNotAcquired):
		outcome = "held"
	}
	o.mu.Lock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[outcome]++
	o.mu.Unlock()
	if o.next != nil {
		o.next.ObserveAcquire(name, err, took)
	}
}

func (o *acquireCounter) ObserveRenew(name string, err error, took time.Duration) {
	if o.next != nil {
		o.next.ObserveRenew(name, err, took)
	}
}

func (o *acquireCounter) ObserveLoss(name string, reason error) {
	if o.next != nil {
		o.next.ObserveLoss(name, reason)
	}
}

func (o *acquireCounter) ObserveEvictions(n int64) {
	if o.next != nil {
		o.next.ObserveEvictions(n)
	}
}

func (o *acquireCounter) get(outcome string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[outcome]
}
