package leasedriver

import (
	"context"
	"time"

	"github.com/holdfast-go/holdfast/fence"
)

// Info is what an operator sees of one lease name (Inspector).
type Info struct {
	// Name is the lease name, as given to lease.Client.Acquire.
	Name string
	// Held reports that the lease is held now; OwnerID, Holder and TTL
	// are set only then.
	Held bool
	// OwnerID is fence.OwnerID of the holder's owner (lease.Lease.Holder().Owner): it
	// tells acquisitions apart and matches the owner_id of log events,
	// but cannot be turned back into the owner, which is a write
	// capability and never leaves the process in a view.
	OwnerID string
	// Holder is the holder label stored with the lease (lease.Options.Holder:
	// the replica's name), "" when the holder set none.
	Holder string
	// TTL is the time left before the lease expires, as the store's clock
	// counts it (ms precision). Zero when not held.
	TTL time.Duration
	// Token is the name's fencing counter: the last token issued (0 when
	// none was ever issued). The holder's token when Held.
	Token fence.Token
	// Waiting reports that a blocked Acquire flagged that it waits for the
	// release.
	Waiting bool
}

// Inspector is the read-only view of leases for operators (the holdfast
// CLI, the admin handler's console). It never changes a lease. redislease.Backend
// implements it.
type Inspector interface {
	// Inspect returns the Info of name; a name never acquired is not an
	// error (Held false, Token 0). lease.ErrInvalidName for a bad name.
	Inspect(ctx context.Context, name string) (Info, error)
	// List returns the Info of the names matching match (a glob as Redis
	// SCAN MATCH reads it, over lease names, "" for all), sorted by name,
	// at most limit (limit < 1: lease.ErrInvalidOptions).
	List(ctx context.Context, match string, limit int) ([]Info, error)
}
