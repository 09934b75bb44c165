package leasedriver

import (
	"context"
	"time"

	"github.com/holdfast-go/holdfast/fence"
)

// Backend stores leases for a lease.Client. lease.New builds a Client on
// the Redis backend (redislease.Backend); lease.NewWithBackend takes any,
// such as a redislease.Backend built with redislease.NewBackend, the Redlock quorum backend of
// package lease/quorum or the PostgreSQL backend of lease/pglease. The
// Client knows no store: keys, scripts, statements and hand-off belong to
// the Backend. Every Backend must pass lease/leasedriver/leasedrivertest.Exercise.
type Backend interface {
	// Acquire takes the lease called name for owner and ttl if it is free,
	// issuing a token strictly greater than every token issued before for
	// name. When another owner holds it, it returns Grant{Acquired: false}
	// with the holder's remaining TTL if known.
	Acquire(ctx context.Context, name, owner string, ttl time.Duration) (Grant, error)
	// Renew extends each lease of batch by its TTL if it still holds its
	// owner, and returns one result per lease: nil, lease.ErrNotHeld, or another
	// error (retried until the trust window ends).
	Renew(ctx context.Context, batch []Held) []error
	// Release deletes the lease if it still holds its owner; lease.ErrNotHeld if
	// not.
	Release(ctx context.Context, h Held) error
}

// Labeled is an optional Backend interface: HolderLabel returns the holder
// label (lease.Options.Holder) the backend stores beside every lease it grants,
// for the lease views to show in place of the owner. redislease.Backend
// (redislease.Options.Holder) and lease/pglease (pglease.Options.Holder) implement it; a
// backend without it stores no label.
type Labeled interface {
	HolderLabel() string
}

// Notifier is an optional Backend interface: Released returns a channel
// that receives when the lease called name is released, and a function to
// stop listening. A waiting Acquire uses it to wake up at once; without it,
// Acquire polls on the holder's remaining TTL. redislease.Backend notifies a
// release when a waiting Acquire flagged the lease (WaitingAcquirer), so
// that a release nobody waits for publishes nothing; a notification missed
// (a flag lost in a failover or a FLUSHALL) costs a waiter no more than
// its poll.
type Notifier interface {
	Released(ctx context.Context, name string) (<-chan struct{}, func(), error)
}

// WaitingAcquirer is an optional interface of a Notifier that notifies
// only the releases somebody waits for: AcquireWaiting is Acquire, also
// flagging a held lease as waited for during flagTTL, so that its release
// notifies. lease.Client.Acquire makes its tries with it once it listens, with a
// flagTTL of twice its longest wait between two tries (lease.Options.RetryMax),
// at most 48 h.
type WaitingAcquirer interface {
	AcquireWaiting(ctx context.Context, name, owner string, ttl, flagTTL time.Duration) (Grant, error)
}

// BatchAcquirer is an optional Backend interface: AcquireAll answers
// each request as Acquire would, in one round trip where it can, with one
// Grant and one error per request. lease.Client.TryAcquireAll uses it.
type BatchAcquirer interface {
	AcquireAll(ctx context.Context, reqs []AcquireRequest) ([]Grant, []error)
}

// BatchReleaser is an optional Backend interface: ReleaseAll releases
// each lease of batch as Release would, in one round trip where it can,
// with one error per lease. The lease.Client uses it to undo the grants of a
// TryAcquireAll batch that came too late.
type BatchReleaser interface {
	ReleaseAll(ctx context.Context, batch []Held) []error
}

// AcquireRequest is one acquisition of a batch.
type AcquireRequest struct {
	Name, Owner string
	TTL         time.Duration
}

// Grant is the answer to Backend.Acquire.
type Grant struct {
	Acquired bool
	Token    fence.Token
	// Remaining is the holder's remaining TTL when not acquired (0 when
	// unknown).
	Remaining time.Duration
	// Handle is the backend's own record of the acquisition (keys,
	// prepared arguments), passed back unchanged in Held.Handle to every
	// Renew and Release of it, so that they need not derive it again.
	// Optional: nil when the backend keeps none.
	Handle any
}

// Held is a lease to renew or release.
type Held struct {
	Name, Owner string
	TTL         time.Duration
	// Handle is Grant.Handle of the acquisition. A backend must also
	// accept a Held without it (nil), as for an acquisition it did not
	// make.
	Handle any
}

// EvictionCounter is an optional Backend interface: Evictions returns how
// many keys the store evicted since the previous call, 0 without I/O on a
// store that keeps every key. redislease.Backend implements it.
type EvictionCounter interface {
	Evictions(ctx context.Context) (int64, error)
}
