package scheduler

import (
	"context"
	"errors"

	"github.com/holdfast-go/holdfast/internal/redispolicy"
	"github.com/holdfast-go/holdfast/lease/leasejoin"
)

// policyChecker is a lease backend or a ledger that can read its store's
// eviction policy (lease.RedisBackend, redisledger.Ledger).
type policyChecker interface {
	CheckPolicy(ctx context.Context) error
}

// checkPolicies fails Start at once on a store that refuses its eviction
// policy (an evicting Redis), rather than every claim later: it returns an
// error matching redislease.ErrEvictionPolicy or redislease.ErrEvictionPolicyUnknown (internal/redispolicy's errors)
// from the lease backend or the ledger when they can check it. An I/O
// error is not Start's: the claims retry it.
func (s *Scheduler) checkPolicies(ctx context.Context) error {
	for _, store := range []any{leasejoin.Backend(s.cfg.Leases), s.cfg.Ledger} {
		c, ok := store.(policyChecker)
		if !ok {
			continue
		}
		if err := c.CheckPolicy(ctx); errors.Is(err, redispolicy.ErrEvictionPolicy) || errors.Is(err, redispolicy.ErrPolicyUnknown) {
			return err
		}
	}
	return nil
}
