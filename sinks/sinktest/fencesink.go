package sinktest

import (
	"context"

	"github.com/holdfast-go/holdfast/fence"
)

// Fence is an admission fence: a store that applies the acceptance rule
// per (resource, scope) and keeps no value, as idemstore.FenceStore.
// Accept returns nil when it accepts h (raising the stored token
// atomically with the check), an error wrapping *fence.StaleTokenError
// when the rule refuses it, and one matching fence.ErrNoToken for token 0.
type Fence interface {
	Accept(ctx context.Context, resource string, h fence.Holder) error
}

// FenceSink adapts f to the suite: Write is Accept of a holder with scope
// "" (the value is dropped: a fence stores none), and WriteScoped
// (ScopedWriter) Accept of the holder given. It is no Reader: Exercise
// checks what f stores by probing writes, and its workload only writes.
// When f is a fence.SlotScopePruner, the sink is a SlotScopeSink (its
// PruneSlotScopes is f's), so Exercise runs SlotScopesClose on it.
func FenceSink(f Fence) Sink {
	if p, ok := f.(fence.SlotScopePruner); ok {
		return prunableFenceSink{fenceSink{f}, p}
	}
	return fenceSink{f}
}

type fenceSink struct{ f Fence }

type prunableFenceSink struct {
	fenceSink
	fence.SlotScopePruner
}

var _ SlotScopeSink = prunableFenceSink{}

var _ ScopedWriter = fenceSink{}

func (s fenceSink) Write(ctx context.Context, resource string, token fence.Token, owner, _ string) error {
	return s.f.Accept(ctx, resource, fence.Holder{Token: token, Owner: owner})
}

func (s fenceSink) WriteScoped(ctx context.Context, resource string, h fence.Holder, _ string) error {
	return s.f.Accept(ctx, resource, h)
}
