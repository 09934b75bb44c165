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
}

// Reader is an optional Sink interface, for a sink that stores values:
// Read returns resource's value and the token of the write that stored
// it, read atomically; ("", fence.None, nil) when never written. Without
// it (an admission fence, FenceSink), the suite checks what is stored by
// probing writes, and its concurrent workload only writes.
type Reader interface {
	Read(ctx context.Context, resource string) (value string, token fence.Token, err error)
}

// ScopedWriter is an optional Sink interface, for a sink that keeps a
// fence per (resource, scope): WriteScoped is Write under the fence of
// h.Scope, the fences of different scopes being independent. Without it,
// ScopesAreIndependent is skipped.
type ScopedWriter interface {
	WriteScoped(ctx context.Context, resource string, h fence.Holder, value string) error
}

// CheckTimeout bounds the linearizability check of one resource's history
// in Exercise and NegativeControl.
const CheckTimeout = time.Minute

// negativeRounds is how many workloads NegativeControl runs, at most, to
// get one non-linearizable history. One nearly always suffices.
const negativeRounds = 5

// Exercise runs the sink contract as parallel subtests of t, one per
// check (see the package documentation for the list). newSink is called
// once per check, with the check's t, and returns the sink to check: a
// fresh one, or one sharing storage with the others (each check writes
// resources of its own), releasing what it holds with t.Cleanup. A check
// that needs an optional interface the sink does not implement is skipped
// with a message naming it; a newSink that skips (no server available)
// skips the check.
func Exercise(t *testing.T, newSink func(t *testing.T) Sink) {
	t.Helper()
	require.NotNil(t, newSink, "sinktest: Exercise: newSink is nil")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newSink(t)
			require.NotNil(t, s, "sinktest: newSink returned nil")
			c.run(t, s)
		})
	}
}

// check is one clause of the contract.
type check struct {
	name string
	run  func(t *testing.T, s Sink)
}

// cases lists the checks Exercise runs, in the order of the package
// documentation.
var cases = []check{
	{"ReadOfUnwrittenResourceIsEmpty", readOfUnwritten},
	{"FirstWriteAccepted", firstWriteAccepted},
	{"GreaterTokenAccepted", greaterTokenAccepted},
	{"EqualTokenSameOwnerAccepted", equalTokenSameOwner},
	{"EqualTokenOtherOwnerRejected", equalTokenOtherOwner},
	{"SmallerTokenRejectedValueUnchanged", smallerTokenRejected},
	{"ZeroTokenRejected", zeroTokenRejected},
	{"RuleHoldsOverASequenceOfHolders", ruleOverASequence},
	{"LongerTokenIsGreater", longerTokenIsGreater},
	{"ResourcesIndependent", resourcesIndependent},
	{"ScopesAreIndependent", scopesAreIndependent},
	{"FenceStateOutOfReach", fenceStateOutOfReach},
	{"SameTokenTwoHoldersExactlyOneAccepted", sameTokenTwoHolders},
	{"ConcurrentWritersEndAtTheLargestToken", concurrentWritersEndAtTheLargest},
	{"ConcurrentHistoryLinearizable", concurrentHistoryLinearizable},
	{"SlotScopesClose", slotScopesClose},
}

func readOfUnwritten(t *testing.T, s Sink) {
	requireState(t, s, "never-written", "", fence.None)
}

func firstWriteAccepted(t *testing.T, s Sink) {
	require.NoError(t, s.Write(t.Context(), "first", 10, "owner-a", "v10"))
	requireState(t, s, "first", "v10", 10)
}

func greaterTokenAccepted(t *testing.T, s Sink) {
	ctx := t.Context()
	require.NoError(t, s.Write(ctx, "greater", 10, "owner-a", "v10"))
	require.NoError(t, s.Write(ctx, "greater", 11, "owner-b", "v11"), "the next holder")
	require.NoError(t, s.Write(ctx, "greater", 1_000_000, "owner-b", "v1e6"), "a jump")
	requireState(t, s, "greater", "v1e6", 1_000_000)
}

func equalTokenSameOwner(t *testing.T, s Sink) {
	ctx := t.Context()
	require.NoError(t, s.Write(ctx, "same-owner", 10, "owner-a", "first"))
	require.NoError(t, s.Write(ctx, "same-owner", 10, "owner-a", "second"), "one holder writing twice")
	requireState(t, s, "same-owner", "second", 10)
}

func equalTokenOtherOwner(t *testing.T, s Sink) {
	ctx := t.Context()
	require.NoError(t, s.Write(ctx, "other-owner", 10, "owner-a", "kept"))
	err := s.Write(ctx, "other-owner", 10, "owner-b", "lost")
	requireStale(t, err, "other-owner", 10, 10)
	requireState(t, s, "other-owner", "kept", 10)
}

func smallerTokenRejected(t *testing.T, s Sink) {
	ctx := t.Context()
	require.NoError(t, s.Write(ctx, "smaller", 10, "owner-b", "kept"))
	requireStale(t, s.Write(ctx, "smaller", 9, "owner-a", "lost"), "smaller", 9, 10)
	requireStale(t, s.Write(ctx, "smaller", 9, "owner-b", "lost"), "smaller", 9, 10)
	requireStale(t, s.Write(ctx, "smaller", 1, "owner-c", "lost"), "smaller", 1, 10)
	requireState(t, s, "smaller", "kept", 10)
	require.NoError(t, s.Write(ctx, "smaller", 10, "owner-b", "still-current"), "the current holder is unaffected")
}

// zeroTokenRejected: token 0 is refused, on a fresh resource and on a
// written one, and leaves nothing behind.
func zeroTokenRejected(t *testing.T, s Sink) {
	ctx := t.Context()
	requireNoToken(t, s.Write(ctx, "zero-fresh", fence.None, "owner-a", "lost"))
	requireState(t, s, "zero-fresh", "", fence.None)

	require.NoError(t, s.Write(ctx, "zero-written", 5, "owner-a", "kept"))
	requireNoToken(t, s.Write(ctx, "zero-written", fence.None, "owner-a", "lost"))
	requireState(t, s, "zero-written", "kept", 5)
}

// ruleOverASequence: holders take turns on one resource as a lease passes
// between them, up to tokens near 2^62, and every refusal reports the
// token in force.
func ruleOverASequence(t *testing.T, s Sink) {
	ctx := t.Context()
	steps := []struct {
		token   fence.Token
		owner   string
		current fence.Token // fence.None: accepted
	}{
		{5, "a", fence.None}, // first write
		{5, "a", fence.None}, // equal token, same owner
		{5, "b", 5},          // equal token, other owner
		{4, "a", 5},          // smaller token
		{6, "b", fence.None}, // greater token
		{5, "a", 6},          // the old holder, now stale
		{6, "a", 6},          // equal token, the previous owner
		{9, "b", fence.None}, // greater token, same owner
		{1 << 62, "c", fence.None},
		{1<<62 - 1, "b", 1 << 62},
	}
	last := ""
	for i, st := range steps {
		value := fmt.Sprintf("step-%d", i)
		err := s.Write(ctx, "sequence", st.token, st.owner, value)
		if st.current == fence.None {
			require.NoError(t, err, "step %d: token %d owner %s", i, st.token, st.owner)
			last = value
			continue
		}
		requireStale(t, err, "sequence", st.token, st.current)
	}
	requireState(t, s, "sequence", last, 1<<62)
}

// longerTokenIsGreater: tokens compare as numbers, not as strings ("10" >
// "9" although '1' < '9').
func longerTokenIsGreater(t *testing.T, s Sink) {
	ctx := t.Context()
	require.NoError(t, s.Write(ctx, "digits", 9, "owner-a", "v9"))
	require.NoError(t, s.Write(ctx, "digits", 10, "owner-b", "v10"))
	requireStale(t, s.Write(ctx, "digits", 9, "owner-a", "lost"), "digits", 9, 10)
	require.NoError(t, s.Write(ctx, "digits", 99, "owner-c", "v99"))
	requireStale(t, s.Write(ctx, "digits", 98, "owner-c", "lost"), "digits", 98, 99)
	requireState(t, s, "digits", "v99", 99)
}

// resourcesIndependent: each resource has a fence of its own, also for
// names that differ only in case, a trailing character, braces (a Redis
// hash tag) or that are not ASCII.
func resourcesIndependent(t *testing.T, s Sink) {
	ctx := t.Context()
	require.NoError(t, s.Write(ctx, "independent-a", 100, "owner-a", "a100"))
	require.NoError(t, s.Write(ctx, "independent-b", 5, "owner-b", "b5"), "a's token does not fence b")
	requireStale(t, s.Write(ctx, "independent-b", 4, "owner-c", "lost"), "independent-b", 4, 5)
	require.NoError(t, s.Write(ctx, "independent-a", 100, "owner-a", "a100-again"))
	requireState(t, s, "independent-a", "a100-again", 100)
	requireState(t, s, "independent-b", "b5", 5)

	odd := []string{"independent/a", "independent/A", "independent/{a}", "independent/a/", "independent/ресурс"}
	for i, r := range odd {
		require.NoError(t, s.Write(ctx, r, fence.Token(10+i), "owner-a", r), "%q", r)
	}
	requireStale(t, s.Write(ctx, odd[0], 9, "owner-a", "lost"), odd[0], 9, 10)
	for i, r := range odd {
		requireState(t, s, r, r, fence.Token(10+i))
	}
}

// scopesAreIndependent: on a sink that keeps a fence per (resource,
// scope), tokens of different scopes (different leases) are never
// compared, scope "" is a scope of its own, and scope and resource do not
// run into each other.
func scopesAreIndependent(t *testing.T, s Sink) {
	sw, ok := s.(ScopedWriter)
	if !ok {
		t.Skip("sinktest: skipped: the Sink does not implement sinktest.ScopedWriter")
	}
	ctx := t.Context()
	const r = "scoped/charges"
	a := fence.Holder{Scope: "settle|tenant-a", Token: 900, Owner: "r1"}
	b := fence.Holder{Scope: "settle|tenant-b", Token: 100, Owner: "r2"}
	require.NoError(t, sw.WriteScoped(ctx, r, a, "a"))
	require.NoError(t, sw.WriteScoped(ctx, r, b, "b"), "a smaller token of another lease is not stale")
	require.NoError(t, sw.WriteScoped(ctx, r, fence.Holder{Token: 1, Owner: "r3"}, "none"), "scope \"\" is a scope of its own")
	require.NoError(t, sw.WriteScoped(ctx, "b:"+r, fence.Holder{Scope: "settle|tenant-", Token: 1, Owner: "r4"}, "joined"),
		"scope and resource do not run into each other")
	err := sw.WriteScoped(ctx, r, fence.Holder{Scope: "settle|tenant-a", Token: 800, Owner: "r5"}, "lost")
	requireStale(t, err, r, 800, 900)
	var stale *fence.StaleTokenError
	require.ErrorAs(t, err, &stale)
	require.Equal(t, "settle|tenant-a", stale.Scope, "StaleTokenError.Scope names the refusing fence")
	require.NoError(t, sw.WriteScoped(ctx, r, fence.Holder{Scope: "settle|tenant-b", Token: 101, Owner: "r6"}, "b2"))
}

// fenceStateOutOfReach: no resource name, and no scope, reaches another
// resource's fence state. After K is written at token 100, writes of
// other holders to resources named like K's fence state in a naive layout
// (K+":fence", K+":fence:fence", K+":token", K+":owner"; with a
// ScopedWriter, scope "" with "3:job:"+K against scope "job" with K) are
// accepted as first writes of fences of their own, and K's fence is
// untouched: a smaller token and an equal token of another owner are
// still refused reporting 100, and K's value is the one written at 100.
func fenceStateOutOfReach(t *testing.T, s Sink) {
	ctx := t.Context()
	const k = "reach/acct:1"
	require.NoError(t, s.Write(ctx, k, 100, "owner-a", "kept"))
	for _, r := range []string{k + ":fence", k + ":fence:fence", k + ":token", k + ":owner"} {
		require.NoError(t, s.Write(ctx, r, 1, "owner-b", "other"), "%q is a resource of its own", r)
	}
	requireStale(t, s.Write(ctx, k, 50, "owner-b", "lost"), k, 50, 100)
	requireStale(t, s.Write(ctx, k, 100, "owner-b", "lost"), k, 100, 100)
	requireState(t, s, k, "kept", 100)
	for _, r := range []string{k + ":fence", k + ":fence:fence", k + ":token", k + ":owner"} {
		requireStale(t, s.Write(ctx, r, 1, "owner-c", "lost"), r, 1, 1)
	}

	sw, ok := s.(ScopedWriter)
	if !ok {
		return
	}
	const pay = "reach/pay"
	require.NoError(t, sw.WriteScoped(ctx, pay, fence.Holder{Scope: "job", Token: 100, Owner: "owner-a"}, "kept"))
	require.NoError(t, sw.WriteScoped(ctx, "3:job:"+pay, fence.Holder{Token: 1, Owner: "owner-b"}, "other"),
		"scope \"\" with resource \"3:job:%s\" is not scope \"job\" with %q", pay, pay)
	requireStale(t, sw.WriteScoped(ctx, pay, fence.Holder{Scope: "job", Token: 50, Owner: "owner-b"}, "lost"), pay, 50, 100)
	requireStale(t, sw.WriteScoped(ctx, "3:job:"+pay, fence.Holder{Token: 1, Owner: "owner-c"}, "lost"), "3:job:"+pay, 1, 1)
}

// concurrentWritersEndAtTheLargest: writers racing with distinct tokens of
// one owner end with the largest one in force, whatever their order.
func concurrentWritersEndAtTheLargest(t *testing.T, s Sink) {
	ctx := t.Context()
	const n = 32
	var (
		wg       sync.WaitGroup
		start    = make(chan struct{})
		mu       sync.Mutex
		accepted []fence.Token
	)
	for i := range n {
		wg.Go(func() {
			<-start
			tok := fence.Token(1000 + i)
			err := s.Write(ctx, "racing", tok, "owner", fmt.Sprintf("v%d", tok))
			var stale *fence.StaleTokenError
			switch {
			case err == nil:
				mu.Lock()
				accepted = append(accepted, tok)
				mu.Unlock()
			case !errors.As(err, &stale):
				t.Errorf("token %d: %v", tok, err)
			}
		})
	}
	close(start)
	wg.Wait()
	require.Contains(t, accepted, fence.Token(1000+n-1), "nothing beats the largest token")
	requireStale(t, s.Write(ctx, "racing", 1000+n-2, "owner", "lost"), "racing", 1000+n-2, 1000+n-1)
	requireState(t, s, "racing", fmt.Sprintf("v%d", 1000+n-1), 1000+n-1)
}

func concurrentHistoryLinearizable(t *testing.T, s Sink) {
	w := Workload{}.withDefaults()
	h, err := Run(t.Context(), s, w)
	require.NoError(t, err, "seed %d", w.Seed)
	t.Logf("seed %d: %d operations, %d writes accepted, %d stale, %d without token",
		w.Seed, len(h.Operations), h.Count(Accepted), h.Count(Stale), h.Count(NoToken))
	require.Positive(t, h.Count(Accepted))
	require.Positive(t, h.Count(Stale))
	require.NoError(t, h.Check(CheckTimeout), "seed %d", w.Seed)
}

// sameTokenRounds is how many resources get two holders with one token.
const sameTokenRounds = 16

// sameTokenTwoHolders forces two holders onto one token (what a broken
// lease would do) on each of sameTokenRounds resources, all at once: for
// each resource exactly one write is accepted, the other is refused with
// Current equal to the token, and the stored value is the winner's.
func sameTokenTwoHolders(t *testing.T, s Sink) {
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

// requireState checks what s stores for resource: with Read, its value
// and token; without, the token by a probing write. A probe at token (> 0)
// by an owner nobody else uses must be refused with Current == token,
// which changes nothing; for fence.None, a probe at token 1 must be
// accepted, which writes the resource: it is then the resource's last
// check.
func requireState(t *testing.T, s Sink, resource, value string, token fence.Token) {
	t.Helper()
	if r, ok := s.(Reader); ok {
		gotValue, gotToken, err := r.Read(t.Context(), resource)
		require.NoError(t, err, "read %q", resource)
		require.Equal(t, value, gotValue, "value of %q", resource)
		require.Equal(t, token, gotToken, "token of %q", resource)
		return
	}
	if token == fence.None {
		require.NoError(t, s.Write(t.Context(), resource, 1, probeOwner, ""), "probe of %q: token 1 accepted, as on a resource never written", resource)
		return
	}
	err := s.Write(t.Context(), resource, token, probeOwner, "")
	var stale *fence.StaleTokenError
	require.ErrorAs(t, err, &stale, "probe of %q at token %d: refused, as the token in force", resource, token)
	require.Equal(t, token, stale.Current, "token of %q (the probe's StaleTokenError.Current)", resource)
}

// probeOwner is the owner of requireState's probes: no holder of the suite.
const probeOwner = "sinktest-probe"

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
