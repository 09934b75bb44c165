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
// accepted. Give each run a prefix of its own when the store outlives it.
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
