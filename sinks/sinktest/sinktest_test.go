package sinktest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/sinktest"
)

func TestMemory(t *testing.T) {
	t.Parallel()
	sinktest.Exercise(t, func(*testing.T) sinktest.Sink { return sinktest.NewMemory() })
}

// TestNegativeControlUnguardedMemory: with the guard removed from the
// write, the checker of Exercise reports a history that is not
// linearizable.
func TestNegativeControlUnguardedMemory(t *testing.T) {
	t.Parallel()
	sinktest.NegativeControl(t, func(*testing.T) sinktest.Sink { return sinktest.NewUnguardedMemory() })
}

// memoryFence is Memory seen as an admission fence (no values, no reads):
// the suite's path for a sink that is no Reader.
type memoryFence struct{ m *sinktest.Memory }

func (f memoryFence) Accept(ctx context.Context, resource string, h fence.Holder) error {
	return f.m.Write(ctx, resource, h.Token, h.Owner, "")
}

// TestFenceSinkOfMemory runs the suite on a sink that is no Reader (nor
// ScopedWriter: Memory keeps no scopes, so ScopesAreIndependent skips):
// what is stored is checked by probes, and the workload only writes.
func TestFenceSinkOfMemory(t *testing.T) {
	t.Parallel()
	sinktest.Exercise(t, func(*testing.T) sinktest.Sink {
		return writeOnly{sinktest.FenceSink(memoryFence{sinktest.NewMemory()})}
	})
}

// writeOnly hides every optional interface of a Sink.
type writeOnly struct{ s sinktest.Sink }

func (w writeOnly) Write(ctx context.Context, r string, tok fence.Token, owner, v string) error {
	return w.s.Write(ctx, r, tok, owner, v)
}

// TestNegativeControlWriteOnlyHistory: the checker also refuses a
// history of writes alone, from a fence with the guard removed.
func TestNegativeControlWriteOnlyHistory(t *testing.T) {
	t.Parallel()
	sinktest.NegativeControl(t, func(*testing.T) sinktest.Sink {
		return writeOnly{sinktest.FenceSink(memoryFence{sinktest.NewUnguardedMemory()})}
	})
}

func TestUnguardedMemoryIsCorrectAlone(t *testing.T) {
	t.Parallel()
	// Without concurrency the unguarded sink obeys the rule: the checker
	// catches it by its races only.
	s := sinktest.NewUnguardedMemory()
	ctx := t.Context()
	require.NoError(t, s.Write(ctx, "r", 10, "a", "v"))
	require.ErrorIs(t, s.Write(ctx, "r", 9, "b", "w"), fence.ErrStaleToken)
	require.ErrorIs(t, s.Write(ctx, "r", 0, "b", "w"), fence.ErrNoToken)
	v, tok, err := s.Read(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, "v", v)
	require.Equal(t, fence.Token(10), tok)
}

// op builds one operation of a handmade history.
func op(call, ret int64, in sinktest.Input, out sinktest.Output) porcupine.Operation {
	return porcupine.Operation{Call: call, Return: ret, Input: in, Output: out}
}

func write(tok fence.Token, owner, value string) sinktest.Input {
	return sinktest.Input{Resource: "r", Token: tok, Owner: owner, Value: value}
}

var (
	read     = sinktest.Input{Resource: "r", Read: true}
	accepted = sinktest.Output{Outcome: sinktest.Accepted}
)

func stale(current fence.Token) sinktest.Output {
	return sinktest.Output{Outcome: sinktest.Stale, Current: current}
}

func got(value string, tok fence.Token) sinktest.Output {
	return sinktest.Output{Outcome: sinktest.Accepted, Value: value, Token: tok}
}

func TestCheckHandmadeHistories(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		ops  []porcupine.Operation
		ok   bool
	}{
		{"SequentialRule", []porcupine.Operation{
			op(0, 1, write(10, "a", "v10"), accepted),
			op(2, 3, write(9, "b", "v9"), stale(10)),
			op(4, 5, write(10, "b", "x"), stale(10)),
			op(6, 7, write(10, "a", "v10b"), accepted),
			op(8, 9, write(0, "a", "x"), sinktest.Output{Outcome: sinktest.NoToken}),
			op(10, 11, read, got("v10b", 10)),
		}, true},
		{"ReadOfUnwritten", []porcupine.Operation{op(0, 1, read, got("", fence.None))}, true},
		{"SmallerAcceptedAfterLarger", []porcupine.Operation{
			op(0, 1, write(10, "a", "v10"), accepted),
			op(2, 3, write(5, "b", "v5"), accepted),
		}, false},
		{"ConcurrentWritesEitherOrder", []porcupine.Operation{
			// Both accepted while overlapping: 5 then 10 is a legal order.
			op(0, 10, write(10, "a", "v10"), accepted),
			op(1, 9, write(5, "b", "v5"), accepted),
			op(11, 12, read, got("v10", 10)),
		}, true},
		{"LostUpdateSeenByRead", []porcupine.Operation{
			// The unguarded race: both accepted, the smaller one landed last.
			op(0, 10, write(10, "a", "v10"), accepted),
			op(1, 9, write(5, "b", "v5"), accepted),
			op(11, 12, read, got("v5", 5)),
		}, false},
		{"SameTokenTwoOwnersBothAccepted", []porcupine.Operation{
			op(0, 10, write(7, "a", "va"), accepted),
			op(1, 9, write(7, "b", "vb"), accepted),
		}, false},
		{"WrongCurrentReported", []porcupine.Operation{
			op(0, 1, write(10, "a", "v10"), accepted),
			op(2, 3, write(9, "b", "v9"), stale(8)),
		}, false},
		{"StaleOnFreshResource", []porcupine.Operation{
			op(0, 1, write(3, "a", "v3"), stale(0)),
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := (&sinktest.History{Operations: tt.ops}).Check(0)
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, sinktest.ErrNotLinearizable)
		})
	}
}

// failing is a sink whose every write fails: Run must report it, not hide it.
type failing struct{ sinktest.Memory }

func (*failing) Write(context.Context, string, fence.Token, string, string) error {
	return errors.New("disk on fire")
}

func TestRunReportsUnexpectedErrors(t *testing.T) {
	t.Parallel()
	h, err := sinktest.Run(t.Context(), &failing{}, sinktest.Workload{Writers: 4, OpsPerWriter: 8})
	require.ErrorContains(t, err, "disk on fire")
	for _, op := range h.Operations {
		require.True(t, op.Input.(sinktest.Input).Read, "only reads succeeded")
	}
}

// noTokenAsStale answers token 0 with a stale error: the wrong error shape.
type noTokenAsStale struct{ *sinktest.Memory }

func (s noTokenAsStale) Write(ctx context.Context, r string, tok fence.Token, owner, v string) error {
	if tok == fence.None {
		return &fence.StaleTokenError{Resource: r}
	}
	return s.Memory.Write(ctx, r, tok, owner, v)
}

func TestRunRejectsWrongErrorShapes(t *testing.T) {
	t.Parallel()
	_, err := sinktest.Run(t.Context(), noTokenAsStale{sinktest.NewMemory()}, sinktest.Workload{Seed: 1})
	require.ErrorContains(t, err, "want an error matching fence.ErrNoToken")
}

func TestRunIsRepeatableAlone(t *testing.T) {
	t.Parallel()
	// One writer: the history is sequential and fully determined by the seed.
	w := sinktest.Workload{Writers: 1, OpsPerWriter: 64, Seed: 7}
	h1, err := sinktest.Run(t.Context(), sinktest.NewMemory(), w)
	require.NoError(t, err)
	h2, err := sinktest.Run(t.Context(), sinktest.NewMemory(), w)
	require.NoError(t, err)
	require.Len(t, h1.Operations, 64)
	for i := range h1.Operations {
		require.Equal(t, h1.Operations[i].Input, h2.Operations[i].Input)
		require.Equal(t, h1.Operations[i].Output, h2.Operations[i].Output)
	}
	require.NoError(t, h1.Check(0))
}
