package sinktest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
)

// SlotScopeSink is a Sink whose per-slot fences can be pruned: a
// ScopedWriter and a fence.SlotScopePruner. Exercise runs
// SlotScopesClose on every such sink.
type SlotScopeSink interface {
	Sink
	ScopedWriter
	fence.SlotScopePruner
}

// slotScopesClose is Exercise's check of fence.SlotScopePruner.
func slotScopesClose(t *testing.T, s Sink) {
	ps, ok := s.(SlotScopeSink)
	if !ok {
		t.Skip("sinktest: the sink is no ScopedWriter with PruneSlotScopes (fence.SlotScopePruner)")
	}
	require.NoError(t, CheckSlotScopesClose(t.Context(), ps, "slot-scopes"))
}

// CheckSlotScopesClose checks PruneSlotScopes on s, writing resources
// whose names start with prefix, and returns the first violation found
// (nil when there is none):
//
//   - two holders of one slot (a stale one and the one that took over);
//     once the slot is pruned, its fence is gone, and neither of them, nor
//     any token, is accepted under its scope again (a sink that deletes the
//     fence without closing the scope lets the stale holder back in: the
//     naive prune, which this check reports);
//   - the refusal is a *fence.StaleTokenError naming the resource, the
//     scope and the watermark, matching fence.ErrStaleToken and
//     fence.ErrScopeClosed;
//   - PruneSlotScopes counts what it deleted, and a second call deletes
//     nothing more;
//   - slots at or after the watermark keep their fences (their stale
//     holders are still refused by the rule, their holders accepted);
//     the unit's own scope, another unit (also one whose name extends the
//     unit's, "U|x"), another resource, and scopes that only look like
//     slot scopes ("U@0042") are untouched;
//   - a lower watermark later does not reopen anything;
//   - a cutoff later than the store's clock minus fence.PruneMargin (one
//     in the future, the store's now, one within the margin) is refused
//     with a *fence.PruneCutoffError matching fence.ErrPruneCutoff,
//     naming the cutoff and a limit of the store's now minus PruneMargin,
//     and changes nothing: a slot just below the refused cutoff keeps its
//     fence and stays open (its holder accepted, a stale token refused by
//     the rule, not as closed).
//
// Exercise runs it on every SlotScopeSink; it is exported for the
// negative controls of sinks whose closing can be removed.
func CheckSlotScopesClose(ctx context.Context, s SlotScopeSink, prefix string) error {
	const unit = "settle|eu"
	base := time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC)
	slot := func(i int) int64 { return base.Add(time.Duration(i) * time.Hour).Unix() }
	scope := func(u string, i int) string { return fmt.Sprintf("%s@%d", u, slot(i)) }
	res, other := prefix+":res", prefix+":other"
	w := func(resource, sc string, tok fence.Token, owner string) error {
		return s.WriteScoped(ctx, resource, fence.Holder{Scope: sc, Token: tok, Owner: owner}, "v")
	}
	accept := func(what, resource, sc string, tok fence.Token, owner string) error {
		if err := w(resource, sc, tok, owner); err != nil {
			return fmt.Errorf("%s: write of token %d under scope %q refused: %w", what, tok, sc, err)
		}
		return nil
	}
	refuseStale := func(what, resource, sc string, tok fence.Token, owner string) error {
		err := w(resource, sc, tok, owner)
		var stale *fence.StaleTokenError
		if !errors.As(err, &stale) {
			return fmt.Errorf("%s: write of token %d under scope %q: %v, want a *fence.StaleTokenError", what, tok, sc, err)
		}
		if errors.Is(err, fence.ErrScopeClosed) {
			return fmt.Errorf("%s: scope %q refused as closed (%v); it is not", what, sc, err)
		}
		return nil
	}
	refuseClosed := func(what, sc string, tok fence.Token, owner string, before int64) error {
		err := w(res, sc, tok, owner)
		if err == nil {
			return fmt.Errorf("%s: write of token %d under the pruned scope %q ACCEPTED: a deleted fence reopened", what, tok, sc)
		}
		var stale *fence.StaleTokenError
		switch {
		case !errors.As(err, &stale) || !errors.Is(err, fence.ErrStaleToken) || !errors.Is(err, fence.ErrScopeClosed):
			return fmt.Errorf("%s: write under the pruned scope %q: %v, want a *fence.StaleTokenError matching fence.ErrScopeClosed", what, sc, err)
		case stale.Resource != res || stale.Scope != sc || stale.Presented != tok:
			return fmt.Errorf("%s: refusal names resource %q scope %q presented %d, want %q %q %d", what, stale.Resource, stale.Scope, stale.Presented, res, sc, tok)
		case stale.ClosedBefore.Unix() != before:
			return fmt.Errorf("%s: refusal says closed before %v, want %v", what, stale.ClosedBefore, time.Unix(before, 0).UTC())
		}
		return nil
	}
	steps := []func() error{
		// Slot 0: holder a (token 5) pauses, b takes over (token 6).
		func() error { return accept("slot 0, holder a", res, scope(unit, 0), 5, "a") },
		func() error { return accept("slot 0, holder b takes over", res, scope(unit, 0), 6, "b") },
		func() error { return refuseStale("slot 0, a is stale", res, scope(unit, 0), 5, "a") },
		func() error { return accept("slot 1", res, scope(unit, 1), 3, "c") },
		func() error { return accept("slot 2", res, scope(unit, 2), 9, "d") },
		func() error { return accept("slot 3", res, scope(unit, 3), 2, "e") },
		func() error { return accept("the unit's scope", res, unit, 4, "u") },
		func() error { return accept("another unit, slot 0", res, scope("settle|eu|x", 0), 7, "x") },
		func() error { return accept("another unit, slot 0", res, scope("settle", 0), 7, "x") },
		func() error {
			return accept("a scope like a slot scope", res, fmt.Sprintf("%s@0%d", unit, slot(0)), 7, "y")
		},
		func() error { return accept("another resource, slot 0", other, scope(unit, 0), 7, "z") },
		func() error {
			n, err := s.PruneSlotScopes(ctx, res, unit, time.Unix(slot(2), 0).Add(999*time.Millisecond))
			switch {
			case err != nil:
				return fmt.Errorf("PruneSlotScopes before slot 2: %w", err)
			case n != 2:
				return fmt.Errorf("PruneSlotScopes before slot 2 deleted %d fences, want 2 (slots 0 and 1)", n)
			}
			return nil
		},
		func() error { return refuseClosed("slot 0, the stale holder a", scope(unit, 0), 5, "a", slot(2)) },
		func() error { return refuseClosed("slot 0, the last holder b", scope(unit, 0), 6, "b", slot(2)) },
		func() error { return refuseClosed("slot 0, any later token", scope(unit, 0), 1<<40, "n", slot(2)) },
		func() error { return refuseClosed("slot 1, its holder", scope(unit, 1), 3, "c", slot(2)) },
		func() error { return refuseClosed("slot -1, never written", scope(unit, -1), 1, "f", slot(2)) },
		func() error { return refuseStale("slot 2 stays fenced", res, scope(unit, 2), 8, "g") },
		func() error { return accept("slot 2, its holder", res, scope(unit, 2), 9, "d") },
		func() error { return accept("slot 3, its holder", res, scope(unit, 3), 2, "e") },
		func() error { return refuseStale("the unit's scope stays fenced", res, unit, 3, "h") },
		func() error { return refuseStale("another unit stays fenced", res, scope("settle|eu|x", 0), 6, "h") },
		func() error { return refuseStale("another unit stays fenced", res, scope("settle", 0), 6, "h") },
		func() error {
			return refuseStale("a scope like a slot scope stays", res, fmt.Sprintf("%s@0%d", unit, slot(0)), 6, "h")
		},
		func() error { return refuseStale("another resource stays fenced", other, scope(unit, 0), 6, "h") },
		func() error {
			n, err := s.PruneSlotScopes(ctx, res, unit, time.Unix(slot(2), 0))
			if err != nil || n != 0 {
				return fmt.Errorf("PruneSlotScopes again: deleted %d, err %v; want 0, nil", n, err)
			}
			return nil
		},
		func() error {
			n, err := s.PruneSlotScopes(ctx, res, unit, time.Unix(slot(-5), 0))
			if err != nil || n != 0 {
				return fmt.Errorf("PruneSlotScopes at a lower watermark: deleted %d, err %v; want 0, nil", n, err)
			}
			return nil
		},
		func() error { return refuseClosed("slot 1 after a lower watermark", scope(unit, 1), 4, "c", slot(2)) },
		func() error { return accept("slot 2 after a lower watermark", res, scope(unit, 2), 10, "d") },
	}
	// Last, so that the negative controls above fail where they are meant
	// to: cutoffs the store must refuse (its clock is the test's, give or
	// take seconds of skew, which the margin dwarfs), each with a slot
	// just below it, written before the refusal and open after it.
	now := time.Now()
	refused := []time.Time{now.Add(time.Hour), now, now.Add(-fence.PruneMargin + time.Minute)}
	below := func(cutoff time.Time) string { return fmt.Sprintf("%s@%d", unit, cutoff.Add(-time.Second).Unix()) }
	refuseCutoff := func(cutoff time.Time) error {
		n, err := s.PruneSlotScopes(ctx, res, unit, cutoff)
		var ce *fence.PruneCutoffError
		switch {
		case err == nil:
			return fmt.Errorf("PruneSlotScopes at %v, later than the store's clock minus fence.PruneMargin, was taken (deleted %d): it closes slots that may still run", cutoff, n)
		case !errors.Is(err, fence.ErrPruneCutoff) || !errors.As(err, &ce):
			return fmt.Errorf("PruneSlotScopes at %v: %v, want a *fence.PruneCutoffError matching fence.ErrPruneCutoff", cutoff, err)
		case n != 0:
			return fmt.Errorf("PruneSlotScopes at %v refused, yet deleted %d", cutoff, n)
		case !ce.Before.Equal(cutoff):
			return fmt.Errorf("refusal names the cutoff %v, want %v", ce.Before, cutoff)
		case ce.Margin != fence.PruneMargin || !ce.Limit.Equal(ce.Now.Add(-fence.PruneMargin)) || !ce.Limit.Before(cutoff):
			return fmt.Errorf("refusal of %v: limit %v, store's clock %v, margin %v; want the clock minus fence.PruneMargin (%v), before the cutoff",
				cutoff, ce.Limit, ce.Now, ce.Margin, fence.PruneMargin)
		case ce.Now.Sub(now).Abs() > time.Minute:
			return fmt.Errorf("refusal of %v: the store's clock %v is over a minute from the test's %v", cutoff, ce.Now, now)
		}
		return nil
	}
	for i, cutoff := range refused {
		tok := fence.Token(20 + i)
		steps = append(steps, func() error { return accept("a slot below a cutoff to refuse", res, below(cutoff), tok, "r") })
	}
	for _, cutoff := range refused {
		steps = append(steps, func() error { return refuseCutoff(cutoff) })
	}
	for i, cutoff := range refused {
		tok := fence.Token(20 + i)
		steps = append(steps,
			func() error { return accept("a slot below a refused cutoff, its holder", res, below(cutoff), tok, "r") },
			func() error {
				return refuseStale("a slot below a refused cutoff stays fenced", res, below(cutoff), tok-1, "s")
			})
	}
	for _, st := range steps {
		if err := st(); err != nil {
			return err
		}
	}
	return nil
}

// RequirePruneCutoffRefused fails t unless err, the answer of a
// PruneSlotScopes of resource at cutoff that pruned n, is the refusal of a
// cutoff too recent: a *fence.PruneCutoffError matching
// fence.ErrPruneCutoff, naming resource, the cutoff and fence.PruneMargin,
// with a store clock within a minute of near, and n zero. clock names the
// store's clock in the message ("Redis's clock").
func RequirePruneCutoffRefused(t testing.TB, err error, n int, resource string, cutoff, near time.Time, clock string) {
	t.Helper()
	require.ErrorIs(t, err, fence.ErrPruneCutoff, "%v", cutoff)
	require.ErrorContains(t, err, resource, "the error names the resource")
	var ce *fence.PruneCutoffError
	require.ErrorAs(t, err, &ce)
	require.True(t, ce.Before.Equal(cutoff))
	require.Equal(t, fence.PruneMargin, ce.Margin)
	require.Equal(t, ce.Now.Add(-fence.PruneMargin), ce.Limit)
	require.WithinDuration(t, near, ce.Now, time.Minute, clock)
	require.Zero(t, n)
}
