package fenceruletest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
)

// Case is one decision of the rule: with Stored (from StoredOwner) the
// state of one fence (fence.None: nothing stored yet), Presented from Owner
// is accepted iff Accept.
type Case struct {
	Name        string
	Stored      fence.Token
	StoredOwner string
	Presented   fence.Token
	Owner       string
	Accept      bool
}

// pow53 is 2^53, above which float64 (Lua's number) no longer holds every
// integer.
const pow53 = fence.Token(1) << 53

// Cases returns the table for an implementation that holds tokens up to
// limit (math.MaxUint64, or math.MaxInt64 for a bigint column): the
// ordinary cases, the cases around 2^53 that a float comparison gets
// wrong, those where a digit count changes (which a plain string
// comparison gets wrong) and those at limit.
func Cases(limit fence.Token) []Case {
	return []Case{
		{"FirstWrite", fence.None, "", 1, "a", true},
		{"GreaterToken", 5, "a", 6, "b", true},
		{"GreaterTokenSameOwner", 5, "a", 6, "a", true},
		{"EqualTokenSameOwner", 5, "a", 5, "a", true},
		{"EqualTokenOtherOwner", 5, "a", 5, "b", false},
		{"SmallerToken", 5, "a", 4, "a", false},
		{"SmallerTokenOtherOwner", 5, "a", 4, "b", false},
		{"ZeroTokenOnFreshFence", fence.None, "", fence.None, "a", false},
		{"ZeroToken", 5, "a", fence.None, "a", false},
		{"MoreDigits", 9, "a", 10, "b", true},
		{"FewerDigits", 10, "a", 9, "b", false},
		{"RealTokens", 1780000000000041, "a", 1780000000000042, "b", true},
		{"RealTokensBehind", 1780000000000042, "a", 1780000000000041, "b", false},
		{"Above2p53OtherOwner", pow53, "a", pow53 + 1, "b", true},
		{"Above2p53SameOwner", pow53, "a", pow53 + 1, "a", true},
		{"Below2p53Refused", pow53 + 1, "a", pow53, "a", false},
		{"Far2p53Refused", pow53 + 2, "a", pow53 + 1, "a", false},
		{"MaxOverMaxMinusOne", limit - 1, "a", limit, "b", true},
		{"MaxMinusOneUnderMax", limit, "a", limit - 1, "a", false},
		{"MaxSameOwner", limit, "a", limit, "a", true},
		{"MaxOtherOwner", limit, "a", limit, "b", false},
		{"MaxOverOne", 1, "a", limit, "b", true},
	}
}

// Accept is one implementation's fenced write for resource by h: nil when
// accepted, an error matching fence.ErrStaleToken when refused, one
// matching fence.ErrNoToken for token 0, any other error on failure.
type Accept func(ctx context.Context, resource string, h fence.Holder) error

// Run runs every case of Cases(limit) as a subtest, each on a resource of
// its own (prefix + the case's name, under scope "job"): it writes Stored
// (which must be accepted), then Presented, and checks the decision; then
// the state left: after an accepted write of a greater token, the stored
// holder is refused; after a refused one, the stored holder is still
// accepted. Then the Collisions, on resources under prefix+"collision".
// Give each run a prefix of its own when the store outlives it.
func Run(t *testing.T, prefix string, limit fence.Token, accept Accept) {
	t.Helper()
	for _, c := range Cases(limit) {
		t.Run(c.Name, func(t *testing.T) {
			ctx, res := t.Context(), prefix+c.Name
			stored := fence.Holder{Scope: "job", Token: c.Stored, Owner: c.StoredOwner}
			if c.Stored != fence.None {
				require.NoError(t, accept(ctx, res, stored), "writing the stored state %d", c.Stored)
			}
			h := fence.Holder{Scope: "job", Token: c.Presented, Owner: c.Owner}
			err := accept(ctx, res, h)
			switch {
			case c.Accept:
				require.NoError(t, err, "stored %d (%q), presented %d (%q)", c.Stored, c.StoredOwner, c.Presented, c.Owner)
			case c.Presented == fence.None:
				require.ErrorIs(t, err, fence.ErrNoToken)
				require.NotErrorIs(t, err, fence.ErrStaleToken)
			default:
				require.ErrorIs(t, err, fence.ErrStaleToken, "stored %d (%q), presented %d (%q)", c.Stored, c.StoredOwner, c.Presented, c.Owner)
				var stale *fence.StaleTokenError
				require.ErrorAs(t, err, &stale)
				require.Equal(t, c.Stored, stale.Current, "the stale error reports the stored token")
				require.Equal(t, c.Presented, stale.Presented)
			}
			if c.Stored == fence.None {
				return
			}
			err = accept(ctx, res, stored)
			if c.Accept && c.Presented > c.Stored {
				require.ErrorIs(t, err, fence.ErrStaleToken, "the accepted %d raised the fence past %d", c.Presented, c.Stored)
				return
			}
			require.NoError(t, err, "the refused %d left the stored %d in place", c.Presented, c.Stored)
		})
	}
	runCollisions(t, prefix, accept)
}

// A Fence names one fence: a resource and a scope.
type Fence struct {
	Resource string
	Scope    string
}

// Collision is a set of fences that must be independent, on a store that
// names them injectively, though a naive key joining their parts (a
// suffix appended to the resource, scope and resource joined by a
// separator, a length prefix on one part only) would make two of them one
// key, or make one fence's state another's resource. Fences returns them
// for resources under prefix (every resource starts with it).
type Collision struct {
	Name   string
	Fences func(prefix string) []Fence
}

// Collisions returns the collision cases Run checks after the rule's:
//
//   - FenceSuffix: resource K and resource K+":fence" (redisfence's fence
//     key before it had a key space of its own);
//   - LengthPrefixedScope: scope "" with resource "3:job:"+R, and scope
//     "job" with resource R (the httpfence Redis fence before scope "" was
//     length-prefixed too);
//   - ScopeResourceSplit: scope S with resource X+":"+Y, and scope S+":"+X
//     with resource Y (a key "<scope>:<resource>");
//   - FieldNames: resources K+":token" and K+":owner" beside K.
//
// The fences of one case all have different resources, so an
// implementation that keeps one fence per resource (a ledger's, whose
// scope is implied by the resource) runs them too.
func Collisions() []Collision {
	return []Collision{
		{"FenceSuffix", func(p string) []Fence {
			return []Fence{{p + "acct:1", "job"}, {p + "acct:1:fence", "job"}, {p + "acct:1:fence:fence", "job"}}
		}},
		{"LengthPrefixedScope", func(p string) []Fence {
			return []Fence{{p + "pay", "job"}, {"3:job:" + p + "pay", ""}}
		}},
		{"ScopeResourceSplit", func(p string) []Fence {
			return []Fence{{p + "x:" + p + "y", "s"}, {p + "y", "s:" + p + "x"}}
		}},
		{"FieldNames", func(p string) []Fence {
			return []Fence{{p + "acct:2", "job"}, {p + "acct:2:token", "job"}, {p + "acct:2:owner", "job"}}
		}},
	}
}

// runCollisions checks each Collision: the first fence is raised to 100
// by one holder, every other one to 1 by another holder (each a first
// write of its own fence, so accepted); then each still holds its own
// state: on the first, token 50 is refused reporting 100 and the holder
// of 100 is accepted again; on every other, an equal token of a third
// owner is refused reporting 1.
func runCollisions(t *testing.T, prefix string, accept Accept) {
	t.Helper()
	for _, c := range Collisions() {
		t.Run("Collision"+c.Name, func(t *testing.T) {
			ctx, fences := t.Context(), c.Fences(prefix+"collision"+c.Name+"/")
			first := fence.Holder{Scope: fences[0].Scope, Token: 100, Owner: "first"}
			require.NoError(t, accept(ctx, fences[0].Resource, first), "%+v", fences[0])
			for _, f := range fences[1:] {
				require.NoError(t, accept(ctx, f.Resource, fence.Holder{Scope: f.Scope, Token: 1, Owner: "other"}),
					"%+v is a fence of its own, never written", f)
			}
			err := accept(ctx, fences[0].Resource, fence.Holder{Scope: fences[0].Scope, Token: 50, Owner: "stale"})
			require.ErrorIs(t, err, fence.ErrStaleToken, "%+v: a stale holder after writes to %+v", fences[0], fences[1:])
			var stale *fence.StaleTokenError
			require.ErrorAs(t, err, &stale)
			require.Equal(t, fence.Token(100), stale.Current, "%+v keeps its own state", fences[0])
			require.NoError(t, accept(ctx, fences[0].Resource, first), "%+v: its holder is still accepted", fences[0])
			for _, f := range fences[1:] {
				err := accept(ctx, f.Resource, fence.Holder{Scope: f.Scope, Token: 1, Owner: "third"})
				require.ErrorAs(t, err, &stale, "%+v keeps its own state", f)
				require.Equal(t, fence.Token(1), stale.Current, "%+v keeps its own state", f)
			}
		})
	}
}

// Go is fence.Accept as an Accept over a map: the reference the table is
// checked against.
func Go() Accept {
	type key struct{ resource, scope string }
	seen := map[key]fence.Holder{}
	return func(_ context.Context, resource string, h fence.Holder) error {
		k := key{resource, h.Scope}
		cur := seen[k]
		if err := h.Check(resource, cur.Token, cur.Owner); err != nil {
			return err
		}
		seen[k] = h
		return nil
	}
}
