package sim

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/sinktest"
)

// sink is where the jobs' effects land: sinktest.Memory (the reference
// fenced register, which passes the sink suite) per unit resource, and
// beside it, in the same critical section, the set of idempotency keys
// already applied, as a guarded job's transaction keeps them (chaos's
// guarded job: fence check and idempotency key in one transaction). An
// effect is applied once per key; a write whose key was applied is a
// replay, accepted without a second effect.
type sink struct {
	mut mutation
	chk *checker

	mu      sync.Mutex
	regs    *sinktest.Memory
	applied map[string]bool
	// epoch counts, per resource, the overwrites of its fence by a write
	// to the resource "<resource>:fence" (for the mutation fenceKeyShared
	// only): each starts a fresh fence.
	epoch map[string]int
}

func newSink(mut mutation, chk *checker) *sink {
	return &sink{mut: mut, chk: chk, regs: sinktest.NewMemory(), applied: map[string]bool{}, epoch: map[string]int{}}
}

// fenceOf names resource's fence in regs: the resource itself, or under
// the planted bug fenceKeyShared, the resource and the number of times a
// write to "<resource>:fence" overwrote it. s.mu is held.
func (s *sink) fenceOf(resource string) string {
	if !s.mut.has(fenceKeyShared) {
		return resource
	}
	if victim, ok := strings.CutSuffix(resource, ":fence"); ok {
		s.epoch[victim]++
	}
	return fmt.Sprintf("%s#%d", resource, s.epoch[resource])
}

// write applies the effect of slot (a slotID) under key, fenced by token
// and owner on resource.
func (s *sink) write(ctx context.Context, resource string, token fence.Token, owner, key string, slot slotID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.mut.has(staleSinkAccept) { // the planted bug skips the check
		if err := s.regs.Write(ctx, s.fenceOf(resource), token, owner, key); err != nil {
			s.chk.refusedWrite()
			return err
		}
	}
	s.chk.accepted(resource, token, owner)
	if s.applied[key] && !s.mut.has(noIdempotency) {
		return nil // a replay: accepted, no second effect
	}
	s.applied[key] = true
	s.chk.effect(slot)
	return nil
}

// sinkView is one replica's way to the sink, over its link (a slow sink
// is a delay on it).
type sinkView struct {
	s *sink
	p *proc
}

func (v *sinkView) write(ctx context.Context, resource string, token fence.Token, owner, key string, slot slotID) error {
	return v.p.call(ctx, "sink", func() error { return v.s.write(ctx, resource, token, owner, key, slot) })
}
