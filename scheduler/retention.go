package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/holdfast-go/holdfast/internal/logattr"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// pruneLease is the lease under which one replica prunes the ledger
// (Options.Retention). No job's lease can have this name: job names may
// not hold '@'.
const pruneLease = "@holdfast-prune"

// pruneLeaseTTL is the prune lease's TTL; the lease's keep-alive renews it
// while a Prune runs.
const pruneLeaseTTL = time.Minute

// pruneInterval is how often a Scheduler with Options.Retention r prunes:
// r/10, at least a minute and at most an hour.
func pruneInterval(r time.Duration) time.Duration {
	return min(max(r/10, time.Minute), time.Hour)
}

// checkRetention refuses a negative Retention, a positive one below
// ledger.PruneMargin (its cutoff could close slots that may still run:
// the ledger would refuse every Prune), and a positive one over a Ledger
// that cannot prune.
func checkRetention(cfg Options) error {
	switch {
	case cfg.Retention < 0:
		return fmt.Errorf("%w: Retention %v, want 0 (off) or more", ErrInvalidOptions, cfg.Retention)
	case cfg.Retention == 0:
		return nil
	case cfg.Retention < ledger.PruneMargin:
		return fmt.Errorf("%w: Retention %v, want 0 (off) or at least ledger.PruneMargin (%v): a later cutoff could close slots that may still run",
			ErrInvalidOptions, cfg.Retention, ledger.PruneMargin)
	}
	if _, ok := cfg.Ledger.(ledger.Pruner); !ok {
		return fmt.Errorf("%w: Retention %v: the Ledger (%T) does not implement ledger.Pruner", ErrInvalidOptions, cfg.Retention, cfg.Ledger)
	}
	return nil
}

// pruneLoop prunes every pruneInterval until claiming stops; Start starts
// it and Stop waits for it (s.wg).
func (s *Scheduler) pruneLoop() {
	every := pruneInterval(s.cfg.Retention)
	t := s.clock.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-s.life.claim.Done():
			return
		case <-t.C():
		}
		s.prune()
		t.Reset(every)
	}
}

// prune runs one Prune under pruneLease, if no other replica holds it.
func (s *Scheduler) prune() {
	l, err := s.cfg.Leases.TryAcquire(s.life.claim, pruneLease, pruneLeaseTTL)
	if err != nil {
		return // another replica prunes, or the lease store fails: the next tick tries again
	}
	defer func() { _ = l.Release(context.WithoutCancel(s.life.claim)) }()
	before := s.clock.Now().Add(-s.cfg.Retention)
	started := s.clock.Now()
	n, err := s.cfg.Ledger.(ledger.Pruner).Prune(l.Context(), before)
	if ce, ok := errors.AsType[*ledger.PruneCutoffError](err); ok && ce.Limit.Before(before) {
		// This replica's clock is ahead of the store's by more than
		// Retention - PruneMargin: prune to the store's own limit, which
		// keeps more (Retention == PruneMargin would otherwise never prune).
		before = ce.Limit
		n, err = s.cfg.Ledger.(ledger.Pruner).Prune(l.Context(), before)
	}
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
	}
	s.log.LogAttrs(s.life.claim, level, "ledger_pruned", slog.Time("before", before), slog.Int64("deleted", n),
		logattr.Duration("took", s.clock.Now().Sub(started)), slog.Any("error", err))
	if err == nil {
		s.pruneSinks(l.Context(), before)
	}
}

// pruneSinks prunes the slot scopes before before of every partition of
// every job in its Job.SlotScopeSinks, after the ledger's Prune with the
// same cutoff succeeded (the ledger then refuses Retry and Backfill of
// those slots). A failure is logged and left to the next prune.
func (s *Scheduler) pruneSinks(ctx context.Context, before time.Time) {
	for _, u := range s.order { // fixed once started
		for _, sink := range u.job.SlotScopeSinks {
			if ctx.Err() != nil {
				return // the prune lease is lost, or claiming stops
			}
			started := s.clock.Now()
			n, err := sink.Sink.PruneSlotScopes(ctx, sink.Resource, u.lease, before)
			level := slog.LevelInfo
			if err != nil {
				level = slog.LevelWarn
			}
			s.log.LogAttrs(ctx, level, "sink_slot_scopes_pruned", slog.String("job", u.job.Name), slog.String("partition", u.partition),
				slog.String("resource", sink.Resource), slog.Time("before", before), slog.Int("deleted", n),
				logattr.Duration("took", s.clock.Now().Sub(started)), slog.Any("error", err))
		}
	}
}
