package scheduler

import (
	"context"
	"errors"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redispolicy"
	"github.com/holdfast-go/holdfast/lease/leasejoin"
)

// policyChecker is a lease backend or a ledger that can read its store's
// eviction policy (lease.RedisBackend, redisledger.Ledger).
type policyChecker interface {
	CheckPolicy(ctx context.Context) error
}

// formatChecker is a lease backend that checks its stored format
// (redislease.Backend; the Redis ledger checks it in CheckPolicy). The
// Postgres stores check theirs at their first use (schedpg.New migrates,
// which checks it too).
type formatChecker interface {
	CheckFormat(ctx context.Context) error
}

// checkPolicies fails Start at once on a store that refuses its eviction
// policy (an evicting Redis) or its stored format, rather than every claim
// later: it returns an error matching redislease.ErrEvictionPolicy or
// redislease.ErrEvictionPolicyUnknown (internal/redispolicy's errors), or
// fence.ErrUnknownFormat (a *fence.FormatError: a marker of another format
// or another store under the prefix), from the lease backend or the ledger
// when they can check it. An I/O error is not Start's: the claims retry
// it.
func (s *Scheduler) checkPolicies(ctx context.Context) error {
	refused := func(err error) bool {
		return errors.Is(err, redispolicy.ErrEvictionPolicy) || errors.Is(err, redispolicy.ErrPolicyUnknown) ||
			errors.Is(err, fence.ErrUnknownFormat)
	}
	stores := []any{leasejoin.Backend(s.cfg.Leases), s.cfg.Ledger}
	// Every policy first: a format check writes its marker when missing,
	// and nothing is written to a Redis whose eviction policy either store
	// refuses. (A format refusal of one store can come after the other
	// wrote its own marker, which is right for it.)
	for _, store := range stores {
		if c, ok := store.(policyChecker); ok {
			if err := c.CheckPolicy(ctx); refused(err) {
				return err
			}
		}
	}
	for _, store := range stores {
		if c, ok := store.(formatChecker); ok {
			if err := c.CheckFormat(ctx); refused(err) {
				return err
			}
		}
	}
	return nil
}
