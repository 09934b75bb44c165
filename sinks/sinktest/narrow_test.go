package sinktest

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
)

// TestNarrowKeepsTheVerdict: on small histories, where porcupine decides
// quickly without help, Check (which narrows first) and porcupine on the
// raw history agree, for correct, unguarded and corrupted histories alike.
func TestNarrowKeepsTheVerdict(t *testing.T) {
	t.Parallel()
	verdicts := map[bool]int{}
	for seed := uint64(1); seed <= 400; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		var s Sink = NewMemory()
		if seed%2 == 0 {
			s = NewUnguardedMemory()
		}
		h, err := Run(t.Context(), s, Workload{Writers: 4, Resources: 1, OpsPerWriter: 6, Seed: seed})
		require.NoError(t, err)
		if seed%3 == 0 {
			corrupt(rng, h)
		}
		want := porcupine.CheckOperations(Model(), h.Operations)
		got := h.Check(0)
		if want {
			require.NoError(t, got, "seed %d", seed)
		} else {
			require.ErrorIs(t, got, ErrNotLinearizable, "seed %d", seed)
		}
		verdicts[want]++
	}
	t.Logf("linearizable: %d, not: %d", verdicts[true], verdicts[false])
	require.Positive(t, verdicts[true])
	require.Positive(t, verdicts[false])
}

// corrupt changes one operation's answer or timing at random.
func corrupt(rng *rand.Rand, h *History) {
	i := rng.IntN(len(h.Operations))
	op := &h.Operations[i]
	out := op.Output.(Output)
	switch rng.IntN(4) {
	case 0: // flip accepted and stale
		if out.Outcome == Accepted && !op.Input.(Input).Read {
			out = Output{Outcome: Stale, Current: fence.Token(rng.IntN(40))}
		} else if out.Outcome == Stale {
			out = Output{Outcome: Accepted}
		}
	case 1: // a read returns another token
		out.Token += fence.Token(rng.IntN(3)) - 1
	case 2: // a stale refusal reports another current token
		out.Current += fence.Token(rng.IntN(3)) - 1
	case 3: // the operation happened later than it did
		d := op.Return - op.Call + 1
		op.Call += d * int64(rng.IntN(4))
		op.Return += d * int64(rng.IntN(4))
		op.Return = max(op.Return, op.Call)
	}
	op.Output = out
}

// TestCheckOverlappingHistoryIsFast replays a recorded history (FencedUpsert
// in SERIALIZABLE transactions retried under load: 116 operations on one
// resource, up to 95 overlapping one another) on which porcupine alone ran
// past a minute. Narrowed, it takes milliseconds.
func TestCheckOverlappingHistoryIsFast(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/serializable-retries.json")
	require.NoError(t, err)
	var recorded []struct {
		Call, Return int64
		Input        Input
		Output       Output
	}
	require.NoError(t, json.Unmarshal(data, &recorded))
	h := &History{}
	for _, r := range recorded {
		h.Operations = append(h.Operations, porcupine.Operation{Call: r.Call, Return: r.Return, Input: r.Input, Output: r.Output})
	}
	require.Len(t, h.Operations, 116)
	require.NoError(t, h.Check(10*time.Second))
}
