package scheduler

import (
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/internal/safe"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// NewRedis returns a Scheduler on one Redis: its leases from lease.New
// and its ledger from redisledger.New, both over rdb (single, Sentinel or
// Cluster), the common case in one call. It fills only the parts left
// nil: an opts.Leases or opts.Ledger given is kept.
//
// opts.Namespace, when set, puts the leases under the key prefix
// Namespace+"lease:" and the ledger under Namespace+"ledger:" (give each
// application its own, such as "billing:"); default the parts' own
// prefixes (redislease.DefaultPrefix, redisledger.DefaultPrefix).
// opts.Holder is given to the lease client too, so the leases and the
// ledger show the same replica (default: the host name, as New), and so is
// opts.Logger (lease_acquired, lease_lost, ...: see package lease). For the
// lease client's metrics (lease.Options.Observer, leaseprom), build the
// client yourself and pass it as Leases.
//
// Errors: ErrInvalidOptions for a nil rdb or what New refuses, the parts'
// ErrInvalidOptions for a Namespace their prefixes refuse. For other
// prefixes, a lease.Options of your own or pgledger, build the parts and
// call New. schedpg.New is the same call for PostgreSQL alone.
func NewRedis(rdb redis.UniversalClient, opts Options) (*Scheduler, error) {
	if safe.IsNil(rdb) {
		return nil, fmt.Errorf("%w: NewRedis: nil redis client", ErrInvalidOptions)
	}
	holder := quickHolder(opts)
	if opts.Leases == nil {
		// The scheduler's Logger for the lease client's events too
		// (lease_lost: the runbooks send operators there).
		lopts := lease.Options{Holder: holder, Logger: opts.Logger}
		if opts.Namespace != "" {
			lopts.Prefix = opts.Namespace + "lease:"
		}
		leases, err := lease.New(rdb, lopts)
		if err != nil {
			return nil, fmt.Errorf("scheduler: NewRedis: %w", err)
		}
		opts.Leases = leases
	}
	if opts.Ledger == nil {
		var ropts redisledger.Options
		if opts.Namespace != "" {
			ropts.Prefix = opts.Namespace + "ledger:"
		}
		ldg, err := redisledger.New(rdb, ropts)
		if err != nil {
			return nil, fmt.Errorf("scheduler: NewRedis: %w", err)
		}
		opts.Ledger = ldg
	}
	opts.Holder = holder
	return New(opts)
}

// quickHolder is the holder label NewRedis gives both the
// leases and the Scheduler: opts.Holder, else New's default (the label of
// an opts.Leases given, else the host name when it is a valid label).
func quickHolder(opts Options) string {
	if opts.Holder != "" {
		return opts.Holder
	}
	return defaultHolder(opts.Leases)
}
