package sinktest

import (
	"cmp"
	"math"
	"slices"

	"github.com/anishathalye/porcupine"

	"github.com/holdfast-go/holdfast/fence"
)

// narrow returns one resource's history prepared for the search: the
// operations porcupine needs, each interval shrunk by what Model implies,
// and the number of operations no interval can hold (a proof that the
// history is not linearizable, left for porcupine to confirm).
//
// Why: under Model the stored token never decreases. So an operation that
// wrote or saw a smaller token is linearized before one that wrote or saw a
// larger one, in every legal order. Each operation has a level (an
// accepted write: its token; a refusal: the Current it reported; a read:
// the token it returned), and for levels a < b every operation of level a
// precedes every operation of level b. Hence an operation cannot take
// effect before the latest call of a lower level, nor after the earliest
// return of a higher level; an operation that saw token c > 0 also comes
// after the earliest call of an accepted write of c. Shrinking the
// intervals accordingly keeps exactly the same legal orders (the verdict
// does not change) but removes most of the overlap porcupine would
// otherwise search through: a slow sink's long, heavily overlapping
// operations make that search exponential, as in a serialization-failure
// retry loop under load.
//
// Writes refused for token 0 are left out: legal in every state and
// changing none, they cannot affect the verdict.
//
// An operation whose shrunk interval would be empty keeps its own: no
// legal order exists, and porcupine, searching the narrowed rest, says so.
//
// After shrinking, a higher level's calls are never earlier than a lower
// level's, but often at the same instant, and porcupine orders equal times
// arbitrarily. Its search tries operations in call order, and trying a
// higher level first sends it down a dead end it can only leave by trying
// every subset of the operations it took meanwhile. So times are scaled by
// K and each call gets its level's rank (< K) added, each return K-1: equal
// calls are then ordered by level, while a return precedes a call exactly
// when it did before (r < c iff r*K + K-1 < c*K + rank).
func narrow(ops []porcupine.Operation) (narrowed []porcupine.Operation, impossible int) {
	type leveled struct {
		op    porcupine.Operation
		level fence.Token
		write bool // an accepted write
	}
	var all []leveled
	for _, op := range ops {
		in, out := op.Input.(Input), op.Output.(Output)
		switch {
		case in.Read:
			all = append(all, leveled{op, out.Token, false})
		case out.Outcome == Accepted:
			all = append(all, leveled{op, in.Token, true})
		case out.Outcome == Stale:
			all = append(all, leveled{op, out.Current, false})
		}
	}
	slices.SortFunc(all, func(a, b leveled) int { return cmp.Compare(a.level, b.level) })

	// Per level, in ascending order: the latest call and earliest return
	// of its operations, and the earliest call of its accepted writes.
	type span struct {
		level                            fence.Token
		maxCall, minReturn, minCallWrite int64
	}
	var spans []span
	for _, l := range all {
		if len(spans) == 0 || spans[len(spans)-1].level != l.level {
			spans = append(spans, span{level: l.level, maxCall: math.MinInt64, minReturn: math.MaxInt64, minCallWrite: math.MaxInt64})
		}
		s := &spans[len(spans)-1]
		s.maxCall = max(s.maxCall, l.op.Call)
		s.minReturn = min(s.minReturn, l.op.Return)
		if l.write {
			s.minCallWrite = min(s.minCallWrite, l.op.Call)
		}
	}
	// below[i]: latest call of levels < spans[i]; above[i]: earliest
	// return of levels > spans[i].
	below := make([]int64, len(spans))
	above := make([]int64, len(spans))
	acc := int64(math.MinInt64)
	for i := range spans {
		below[i] = acc
		acc = max(acc, spans[i].maxCall)
	}
	acc = math.MaxInt64
	for i := len(spans) - 1; i >= 0; i-- {
		above[i] = acc
		acc = min(acc, spans[i].minReturn)
	}

	// The scale for ordering equal calls by level, if times allow it.
	k := int64(len(spans) + 1)
	var latest int64
	for _, l := range all {
		latest = max(latest, l.op.Return)
	}
	if latest >= math.MaxInt64/k-1 {
		k = 1 // no room: leave ties to porcupine
	}

	narrowed = make([]porcupine.Operation, 0, len(all))
	i := 0
	for _, l := range all {
		for spans[i].level != l.level {
			i++
		}
		op := l.op
		call, ret := max(op.Call, below[i]), min(op.Return, above[i])
		if !l.write && l.level != fence.None && spans[i].minCallWrite != math.MaxInt64 {
			call = max(call, spans[i].minCallWrite)
		}
		if call <= ret {
			op.Call, op.Return = call, ret
		} else {
			impossible++
		}
		if k > 1 {
			op.Call, op.Return = op.Call*k+int64(i), op.Return*k+k-1
		}
		narrowed = append(narrowed, op)
	}
	slices.SortFunc(narrowed, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	return narrowed, impossible
}
