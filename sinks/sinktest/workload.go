package sinktest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/holdfast-go/holdfast/fence"
)

// Defaults for Workload.
const (
	// DefaultWriters is Workload.Writers when zero.
	DefaultWriters = 64
	// DefaultResources is Workload.Resources when zero.
	DefaultResources = 8
	// DefaultOpsPerWriter is Workload.OpsPerWriter when zero.
	DefaultOpsPerWriter = 16
	// DefaultPrefix is Workload.Prefix when empty.
	DefaultPrefix = "concurrent-"
)

// Workload shapes a concurrent run of Run. The zero value uses the defaults.
//
// Each writer is one goroutine with an owner of its own ("writer-07"). All
// start together; each runs OpsPerWriter operations on resources picked at
// random: a quarter are reads (on a Reader; writes otherwise), the rest
// writes. A write's token is the
// count of operations started so far, by all writers, plus a random offset
// below 32, so tokens grow with time but writers overtake one another, and
// both accepted and refused writes are common;
// tokens collide between owners (equal token, other owner), a writer
// sometimes presents its last token for a resource again (equal token, same
// owner), and one write in 32 carries token 0.
type Workload struct {
	// Writers is the number of goroutines. Default DefaultWriters (64).
	Writers int
	// Resources is the number of resources written. Default
	// DefaultResources (8).
	Resources int
	// OpsPerWriter is the number of operations per writer. Default
	// DefaultOpsPerWriter (16).
	OpsPerWriter int
	// Prefix starts every resource name; the index follows it. Default
	// DefaultPrefix ("concurrent-").
	Prefix string
	// Seed makes the random choices repeatable; 0 picks a random seed.
	Seed uint64
}

func (w Workload) withDefaults() Workload {
	if w.Writers <= 0 {
		w.Writers = DefaultWriters
	}
	if w.Resources <= 0 {
		w.Resources = DefaultResources
	}
	if w.OpsPerWriter <= 0 {
		w.OpsPerWriter = DefaultOpsPerWriter
	}
	if w.Prefix == "" {
		w.Prefix = DefaultPrefix
	}
	if w.Seed == 0 {
		w.Seed = rand.Uint64() | 1
	}
	return w
}

// Resource returns the name of resource i of w.
func (w Workload) Resource(i int) string {
	return fmt.Sprintf("%s%d", w.withDefaults().Prefix, i)
}

// maxReportedErrors bounds the unexpected errors Run joins into its error.
const maxReportedErrors = 5

// Run runs workload w against s and returns the history of every operation
// that got an answer the contract allows (Accepted, Stale, NoToken).
//
// Any other answer (a failure, a refusal of the wrong type, a stale error
// for token 0) is an unexpected error: Run keeps going, leaves that
// operation out of the history and returns an error joining the first few.
// A history with operations left out may look non-linearizable; check the
// error first. Run stops early when ctx ends.
func Run(ctx context.Context, s Sink, w Workload) (*History, error) {
	w = w.withDefaults()
	_, canRead := s.(Reader)
	start := time.Now()
	now := func() int64 { return int64(time.Since(start)) } // monotonic

	type result struct {
		ops  []porcupine.Operation
		errs []error
	}
	results := make([]result, w.Writers)
	begin := make(chan struct{})
	var started atomic.Uint64 // operations started by all writers
	var wg sync.WaitGroup
	for i := range w.Writers {
		wg.Go(func() {
			<-begin
			rng := rand.New(rand.NewPCG(w.Seed, uint64(i)))
			owner := fmt.Sprintf("writer-%02d", i)
			last := map[int]fence.Token{} // this writer's last token per resource
			for k := 0; k < w.OpsPerWriter && ctx.Err() == nil; k++ {
				started.Add(1)
				r := rng.IntN(w.Resources)
				in := Input{Resource: fmt.Sprintf("%s%d", w.Prefix, r)}
				switch p := rng.IntN(32); {
				case p < 8 && canRead:
					in.Read = true
				case p == 8:
					in.Token = fence.None
				case p < 12 && last[r] != fence.None:
					in.Token = last[r]
				default:
					in.Token = fence.Token(started.Load() + 1 + rng.Uint64N(32))
				}
				if !in.Read {
					in.Owner = owner
					in.Value = fmt.Sprintf("%s/%d", owner, k)
					if in.Token != fence.None {
						last[r] = in.Token
					}
				}
				op, err := runOne(ctx, s, in, now)
				op.ClientId = i
				if err != nil {
					results[i].errs = append(results[i].errs, err)
					continue
				}
				results[i].ops = append(results[i].ops, op)
			}
		})
	}
	close(begin)
	wg.Wait()

	h := &History{}
	var errs []error
	total := 0
	for _, r := range results {
		h.Operations = append(h.Operations, r.ops...)
		total += len(r.errs)
		for _, err := range r.errs {
			if len(errs) < maxReportedErrors {
				errs = append(errs, err)
			}
		}
	}
	slices.SortFunc(h.Operations, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	if total > 0 {
		return h, fmt.Errorf("sinktest: %d operations failed unexpectedly, first %d: %w", total, len(errs), errors.Join(errs...))
	}
	if err := ctx.Err(); err != nil {
		return h, fmt.Errorf("sinktest: workload stopped early: %w", err)
	}
	return h, nil
}

// runOne performs in against s and classifies the answer.
func runOne(ctx context.Context, s Sink, in Input, now func() int64) (porcupine.Operation, error) {
	op := porcupine.Operation{Input: in, Call: now()}
	if in.Read {
		value, token, err := s.(Reader).Read(ctx, in.Resource)
		op.Return = now()
		if err != nil {
			return op, fmt.Errorf("read %q: %w", in.Resource, err)
		}
		op.Output = Output{Outcome: Accepted, Value: value, Token: token}
		return op, nil
	}
	err := s.Write(ctx, in.Resource, in.Token, in.Owner, in.Value)
	op.Return = now()
	out, err := classify(in, err)
	op.Output = out
	return op, err
}

// classify maps a Write error onto an Output, or returns an error when the
// answer breaks the contract's error shapes.
func classify(in Input, err error) (Output, error) {
	var stale *fence.StaleTokenError
	switch {
	case err == nil:
		return Output{Outcome: Accepted}, nil
	case in.Token == fence.None:
		if errors.Is(err, fence.ErrNoToken) && !errors.Is(err, fence.ErrStaleToken) {
			return Output{Outcome: NoToken}, nil
		}
		return Output{}, fmt.Errorf("write %q with token 0: want an error matching fence.ErrNoToken, got: %w", in.Resource, err)
	case errors.As(err, &stale):
		if stale.Presented != in.Token {
			return Output{}, fmt.Errorf("write %q token %d: StaleTokenError.Presented = %d", in.Resource, in.Token, stale.Presented)
		}
		return Output{Outcome: Stale, Current: stale.Current}, nil
	default:
		return Output{}, fmt.Errorf("write %q token %d owner %s: %w", in.Resource, in.Token, in.Owner, err)
	}
}
