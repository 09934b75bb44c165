package sinktest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
)

// Sink is a fenced store as the suite sees it. See the package
// documentation for what an adapter must return.
type Sink interface {
	// Write stores value for resource iff the acceptance rule passes for
	// token and owner, atomically with the check. It returns nil when
	// accepted, an error wrapping *fence.StaleTokenError when refused by
	// the rule, and an error matching fence.ErrNoToken for token 0.
	Write(ctx context.Context, resource string, token fence.Token, owner, value string) error
	// Read returns resource's value and the token of the write that stored
	// it, read atomically; ("", fence.None, nil) when never written.
	Read(ctx context.Context, resource string) (value string, token fence.Token, err error)
}

// CheckTimeout bounds the linearizability check of one resource's history
// in Exercise and NegativeControl.
const CheckTimeout = time.Minute

// negativeRounds is how many workloads NegativeControl runs, at most, to
// get one non-linearizable history. One nearly always suffices.
const negativeRounds = 5

// Exercise runs the conformance suite against the sinks newSink makes, as
// parallel subtests of t. newSink is called once per subtest; the sink it
// returns may share storage with others as long as resource names do not
// collide (each subtest uses names of its own), and must release what it
// holds with t.Cleanup.
func Exercise(t *testing.T, newSink func(t *testing.T) Sink) {
	t.Helper()

	t.Run("ReadOfUnwrittenResourceIsEmpty", func(t *testing.T) {
		t.Parallel()
		s := newSink(t)
		requireState(t, s, "never-written", "", fence.None)
	})

	t.Run("FirstWriteAccepted", func(t *testing.T) {
		t.Parallel()
		s := newSink(t)
		require.NoError(t, s.Write(t.Context(), "first", 10, "owner-a", "v10"))
		requireState(t, s, "first", "v10", 10)
	})

	t.Run("GreaterTokenAccepted", func(t *testing.T) {
		t.Parallel()
		s := newSink(t)
		ctx := t.Context()
		require.NoError(t, s.Write(ctx, "greater", 10, "owner-a", "v10"))
		require.NoError(t, s.Write(ctx, "greater", 11, "owner-b", "v11"), "the next holder")
		require.NoError(t, s.Write(ctx, "greater", 1_000_000, "owner-b", "v1e6"), "a jump")
		requireState(t, s, "greater", "v1e6", 1_000_000)
	})

	t.Run("EqualTokenSameOwnerAccepted", func(t *testing.T) {
		t.Parallel()
		s := newSink(t)
		ctx := t.Context()
		require.NoError(t, s.Write(ctx, "same-owner", 10, "owner-a", "first"))
		require.NoError(t, s.Write(ctx, "same-owner", 10, "owner-a", "second"), "one holder writing twice")
		requireState(t, s, "same-owner", "second", 10)
	})

	t.Run("EqualTokenOtherOwnerRejected", func(t *testing.T) {
		t.Parallel()
		s := newSink(t)
		ctx := t.Context()
		require.NoError(t, s.Write(ctx, "other-owner", 10, "owner-a", "kept"))
		err := s.Write(ctx, "other-owner", 10, "owner-b", "lost")
		requireStale(t, err, "other-owner", 10, 10)
		requireState(t, s, "other-owner", "kept", 10)
	})

	t.Run("SmallerTokenRejectedValueUnchanged", func(t *testing.T) {
		t.Parallel()
		s := newSink(t)
		ctx := t.Context()
		require.NoError(t, s.Write(ctx, "smaller", 10, "owner-b", "kept"))
		requireStale(t, s.Write(ctx, "smaller", 9, "owner-a", "lost"), "smaller", 9, 10)
		requireStale(t, s.Write(ctx, "smaller", 9, "owner-b", "lost"), "smaller", 9, 10)
		requireStale(t, s.Write(ctx, "smaller", 1, "owner-c", "lost"), "smaller", 1, 10)
		requireState(t, s, "smaller", "kept", 10)
		require.NoError(t, s.Write(ctx, "smaller", 10, "owner-b", "still-current"), "the current holder is unaffected")
	})

	t.Run("ZeroTokenRejected", func(t *testing.T) {
		t.Parallel()
		s := newSink(t)
		ctx := t.Context()
		requireNoToken(t, s.Write(ctx, "zero-fresh", fence.None, "owner-a", "lost"))
		requireState(t, s, "zero-fresh", "", fence.None)

		require.NoError(t, s.Write(ctx, "zero-written", 5, "owner-a", "kept"))
		requireNoToken(t, s.Write(ctx, "zero-written", fence.None, "owner-a", "lost"))
		requireState(t, s, "zero-written", "kept", 5)
	})

	t.Run("ResourcesIndependent", func(t *testing.T) {
		t.Parallel()
		s := newSink(t)
		ctx := t.Context()
		require.NoError(t, s.Write(ctx, "independent-a", 100, "owner-a", "a100"))
		require.NoError(t, s.Write(ctx, "independent-b", 5, "owner-b", "b5"), "a's token does not fence b")
		requireStale(t, s.Write(ctx, "independent-b", 4, "owner-c", "lost"), "independent-b", 4, 5)
		require.NoError(t, s.Write(ctx, "independent-a", 100, "owner-a", "a100-again"))
		requireState(t, s, "independent-a", "a100-again", 100)
		requireState(t, s, "independent-b", "b5", 5)
	})

	t.Run("SameTokenTwoHoldersExactlyOneAccepted", func(t *testing.T) {
		t.Parallel()
		sameTokenTwoHolders(t, newSink(t))
	})

	t.Run("ConcurrentHistoryLinearizable", func(t *testing.T) {
		t.Parallel()
		s := newSink(t)
		w := Workload{}.withDefaults()
		h, err := Run(t.Context(), s, w)
		require.NoError(t, err, "seed %d", w.Seed)
		t.Logf("seed %d: %d operations, %d writes accepted, %d stale, %d without token",
			w.Seed, len(h.Operations), h.Count(Accepted), h.Count(Stale), h.Count(NoToken))
		require.Positive(t, h.Count(Accepted))
		require.Positive(t, h.Count(Stale))
		require.NoError(t, h.Check(CheckTimeout), "seed %d", w.Seed)
	})
}

// sameTokenRounds is how many resources get two holders with one token.
const sameTokenRounds = 16

// sameTokenTwoHolders forces two holders onto one token (what a broken
// lease would do) on each of sameTokenRounds resources, all at once: for
// each resource exactly one write is accepted, the other is refused with
// Current equal to the token, and the stored value is the winner's.
func sameTokenTwoHolders(t *testing.T, s Sink) {
	t.Helper()
	ctx := t.Context()
	const holders = 2
	errs := make([][holders]error, sameTokenRounds)
	begin := make(chan struct{})
	var wg sync.WaitGroup
	for r := range sameTokenRounds {
		for h := range holders {
			wg.Go(func() {
				<-begin
				errs[r][h] = s.Write(ctx, fmt.Sprintf("same-token-%d", r), 42, fmt.Sprintf("holder-%d", h), fmt.Sprintf("from-holder-%d", h))
			})
		}
	}
	close(begin)
	wg.Wait()

	for r := range sameTokenRounds {
		resource := fmt.Sprintf("same-token-%d", r)
		winner := -1
		for h, err := range errs[r] {
			if err == nil {
				require.Equal(t, -1, winner, "%s: holders %d and %d both accepted with token 42", resource, winner, h)
				winner = h
				continue
			}
			requireStale(t, err, resource, 42, 42)
		}
		require.NotEqual(t, -1, winner, "%s: no holder accepted: %v", resource, errs[r])
		requireState(t, s, resource, fmt.Sprintf("from-holder-%d", winner), 42)
	}
}

// NegativeControl runs the concurrent workload of Exercise against sinks
// with the guard removed and requires the checker to report a history that
// is not linearizable, to show that the check of Exercise can fail. It
// makes a fresh sink with newUnguarded for each of up to 5 runs and passes
// at the first run the checker refuses; it fails if the checker accepts
// them all (or if the sink fails an operation).
func NegativeControl(t *testing.T, newUnguarded func(t *testing.T) Sink) {
	t.Helper()
	for round := 1; round <= negativeRounds; round++ {
		w := Workload{Prefix: fmt.Sprintf("negative-%d-", round)}.withDefaults()
		h, err := Run(t.Context(), newUnguarded(t), w)
		require.NoError(t, err, "seed %d", w.Seed)
		err = h.Check(CheckTimeout)
		if errors.Is(err, ErrNotLinearizable) {
			t.Logf("run %d, seed %d: %d operations, %d writes accepted; checker, as expected: %v",
				round, w.Seed, len(h.Operations), h.Count(Accepted), err)
			return
		}
		t.Logf("run %d, seed %d: checker result %v; trying again", round, w.Seed, err)
	}
	t.Fatalf("the checker accepted %d histories of a sink without its guard: it cannot fail", negativeRounds)
}

func requireState(t *testing.T, s Sink, resource, value string, token fence.Token) {
	t.Helper()
	gotValue, gotToken, err := s.Read(t.Context(), resource)
	require.NoError(t, err, "read %q", resource)
	require.Equal(t, value, gotValue, "value of %q", resource)
	require.Equal(t, token, gotToken, "token of %q", resource)
}

func requireStale(t *testing.T, err error, resource string, presented, current fence.Token) {
	t.Helper()
	require.ErrorIs(t, err, fence.ErrStaleToken)
	var stale *fence.StaleTokenError
	require.ErrorAs(t, err, &stale)
	require.Contains(t, stale.Resource, resource, "StaleTokenError.Resource names the resource")
	require.Equal(t, presented, stale.Presented, "StaleTokenError.Presented")
	require.Equal(t, current, stale.Current, "StaleTokenError.Current")
}

func requireNoToken(t *testing.T, err error) {
	t.Helper()
	require.ErrorIs(t, err, fence.ErrNoToken)
	require.NotErrorIs(t, err, fence.ErrStaleToken)
}
