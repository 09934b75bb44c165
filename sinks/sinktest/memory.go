package sinktest

import (
	"context"
	"runtime"
	"sync"

	"github.com/holdfast-go/holdfast/fence"
)

// Memory is the reference sink: a map of fenced registers behind one
// mutex, the contract with nothing else in the way. Use it as a fake of a
// fenced store in tests. The zero value is not ready: use NewMemory (or
// NewUnguardedMemory for the negative control). It is safe for concurrent
// use.
type Memory struct {
	unguarded bool

	mu   sync.Mutex
	regs map[string]Register
}

// NewMemory returns an empty reference sink.
func NewMemory() *Memory {
	return &Memory{regs: map[string]Register{}}
}

// NewUnguardedMemory returns the negative control: a Memory with the guard
// removed from the write. Its Write applies the rule to a read of the
// register, yields the processor, and then stores the value without
// looking again, the check-then-act mistake of a sink that reads the
// current token in one statement and writes in another. A concurrent write
// of a larger token accepted in between is overwritten; single-threaded, it
// behaves exactly like NewMemory.
func NewUnguardedMemory() *Memory {
	return &Memory{unguarded: true, regs: map[string]Register{}}
}

var _ Sink = (*Memory)(nil)

// Write stores value for resource iff fence.Check accepts token and owner
// (see Sink).
func (m *Memory) Write(_ context.Context, resource string, token fence.Token, owner, value string) error {
	m.mu.Lock()
	cur := m.regs[resource]
	if m.unguarded {
		m.mu.Unlock()
		if err := fence.Check(resource, cur.Token, cur.Owner, token, owner); err != nil {
			return err
		}
		runtime.Gosched() // widen the window between check and write
		m.mu.Lock()
		m.regs[resource] = Register{Token: token, Owner: owner, Value: value}
		m.mu.Unlock()
		return nil
	}
	defer m.mu.Unlock()
	if err := fence.Check(resource, cur.Token, cur.Owner, token, owner); err != nil {
		return err
	}
	m.regs[resource] = Register{Token: token, Owner: owner, Value: value}
	return nil
}

// Read returns resource's value and token (see Sink).
func (m *Memory) Read(_ context.Context, resource string) (string, fence.Token, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.regs[resource]
	return r.Value, r.Token, nil
}
