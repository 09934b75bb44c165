package sinktest

import (
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/holdfast-go/holdfast/fence"
)

// Errors from History.Check.
var (
	// ErrNotLinearizable reports a history for which no sequential order of
	// the operations, consistent with their call and return times, obeys
	// Model: the sink broke the contract.
	ErrNotLinearizable = errors.New("sinktest: history is not linearizable")

	// ErrCheckTimeout reports that the checker ran out of time before it
	// could decide (porcupine.Unknown). Checking linearizability is
	// NP-hard; a smaller workload decides faster.
	ErrCheckTimeout = errors.New("sinktest: linearizability check timed out")
)

// Outcome is how a sink answered an operation.
type Outcome uint8

// The outcomes of an operation.
const (
	// Accepted: a write was accepted (nil error), or a read returned.
	Accepted Outcome = iota + 1
	// Stale: a write was refused with a *fence.StaleTokenError.
	Stale
	// NoToken: a write with token 0 was refused with fence.ErrNoToken.
	NoToken
)

func (o Outcome) String() string {
	switch o {
	case Accepted:
		return "ok"
	case Stale:
		return "stale"
	case NoToken:
		return "no-token"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// Input is what an operation asked for: the Input of a porcupine.Operation
// in a History.
type Input struct {
	Resource string
	// Read is true for a read; the other fields below are then unused.
	Read  bool
	Token fence.Token
	Owner string
	Value string
}

// Output is what the sink answered: the Output of a porcupine.Operation.
type Output struct {
	Outcome Outcome
	// Current is the token a Stale refusal reported.
	Current fence.Token
	// Value and Token are what a read returned.
	Value string
	Token fence.Token
}

// Register is Model's state for one resource: the last accepted write.
type Register struct {
	Token fence.Token
	Owner string
	Value string
}

var stateSeed = maphash.MakeSeed()

// Model is the sequential specification of a fenced register, per
// resource (histories are partitioned by Input.Resource). From state s:
//
//   - a write (t, o, v) answered Accepted is legal iff fence.Accept(s.Token,
//     s.Owner, t, o); the state becomes (t, o, v);
//   - a write answered Stale is legal iff t != 0, the rule refuses it and
//     the reported Current equals s.Token; the state is unchanged;
//   - a write answered NoToken is legal iff t == 0; the state is unchanged;
//   - a read is legal iff it returned s.Value and s.Token.
//
// The initial state is (fence.None, "", ""): a resource never written.
func Model() porcupine.Model {
	return porcupine.Model{
		Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
			byResource := map[string][]porcupine.Operation{}
			var order []string
			for _, op := range history {
				r := op.Input.(Input).Resource
				if _, ok := byResource[r]; !ok {
					order = append(order, r)
				}
				byResource[r] = append(byResource[r], op)
			}
			parts := make([][]porcupine.Operation, 0, len(order))
			for _, r := range order {
				parts = append(parts, byResource[r])
			}
			return parts
		},
		Init: func() any { return Register{} },
		Step: func(state, input, output any) (bool, any) {
			s, in, out := state.(Register), input.(Input), output.(Output)
			return step(s, in, out)
		},
		Hash: func(state any) uint64 {
			s := state.(Register)
			return maphash.Comparable(stateSeed, s)
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(Input), output.(Output)
			if in.Read {
				return fmt.Sprintf("read() -> (%q, %d)", out.Value, out.Token)
			}
			s := fmt.Sprintf("write(%d, %s, %q) -> %s", in.Token, in.Owner, in.Value, out.Outcome)
			if out.Outcome == Stale {
				s += fmt.Sprintf(" current %d", out.Current)
			}
			return s
		},
		DescribeState: func(state any) string {
			s := state.(Register)
			return fmt.Sprintf("(%d, %s, %q)", s.Token, s.Owner, s.Value)
		},
	}
}

func step(s Register, in Input, out Output) (bool, Register) {
	if in.Read {
		return out.Outcome == Accepted && out.Value == s.Value && out.Token == s.Token, s
	}
	switch out.Outcome {
	case Accepted:
		if fence.Accept(s.Token, s.Owner, in.Token, in.Owner) {
			return true, Register{Token: in.Token, Owner: in.Owner, Value: in.Value}
		}
		return false, s
	case Stale:
		return in.Token != fence.None && !fence.Accept(s.Token, s.Owner, in.Token, in.Owner) && out.Current == s.Token, s
	case NoToken:
		return in.Token == fence.None, s
	}
	return false, s
}

// History is a record of operations on a sink: each with its input, its
// output, and its call and return times on one monotonic clock.
type History struct {
	// Operations in call order, as porcupine takes them: Input is an Input,
	// Output an Output, ClientId the worker that ran it.
	Operations []porcupine.Operation
}

// Count returns how many operations of h had outcome o, reads excluded.
func (h *History) Count(o Outcome) int {
	n := 0
	for _, op := range h.Operations {
		if !op.Input.(Input).Read && op.Output.(Output).Outcome == o {
			n++
		}
	}
	return n
}

// Check decides whether h is linearizable under Model, one resource at a
// time, within timeout per resource (0: no limit). It returns nil when it
// is, an error matching ErrNotLinearizable that names the first resource
// whose history is not, or one matching ErrCheckTimeout.
//
// Before porcupine searches a resource's history, Check shrinks each
// operation's interval by what Model implies (the token never decreases,
// so an operation that wrote or saw a smaller token precedes one that wrote
// or saw a larger one) and leaves out writes refused for token 0, which are
// legal in every state. The legal orders, and so the verdict, stay the
// same; the search stays small even for slow sinks whose operations
// overlap heavily.
func (h *History) Check(timeout time.Duration) error {
	model := Model()
	parts := model.Partition(h.Operations)
	slices.SortFunc(parts, func(a, b []porcupine.Operation) int {
		return strings.Compare(a[0].Input.(Input).Resource, b[0].Input.(Input).Resource)
	})
	var timedOut []string
	for _, part := range parts {
		resource := part[0].Input.(Input).Resource
		ops, impossible := narrow(part)
		if len(ops) == 0 {
			continue
		}
		// The verbose variant waits for every checker goroutine before it
		// returns, so none outlives the call.
		result, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
		switch result {
		case porcupine.Ok:
		case porcupine.Illegal:
			longest := 0
			for _, partial := range info.PartialLinearizations() {
				for _, l := range partial {
					longest = max(longest, len(l))
				}
			}
			return fmt.Errorf("%w: resource %q: %d operations, longest linearizable prefix %d, %d operations out of token order",
				ErrNotLinearizable, resource, len(ops), longest, impossible)
		default:
			timedOut = append(timedOut, resource)
		}
	}
	if len(timedOut) > 0 {
		return fmt.Errorf("%w after %v for resources %q", ErrCheckTimeout, timeout, timedOut)
	}
	return nil
}
