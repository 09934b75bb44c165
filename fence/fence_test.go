package fence

import (
	"context"
	"errors"
	"math"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAcceptanceRule(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name         string
		current      Token
		currentOwner string
		presented    Token
		owner        string
		want         bool
	}{
		{"first write", None, "", 1, "a", true},
		{"greater token", 5, "a", 6, "b", true},
		{"greater token same owner", 5, "a", 6, "a", true},
		{"equal token same owner", 5, "a", 5, "a", true},
		{"equal token other owner", 5, "a", 5, "b", false},
		{"smaller token", 5, "a", 4, "a", false},
		{"zero token on fresh resource", None, "", None, "", false},
		{"zero token", 5, "a", None, "a", false},
		{"max token", math.MaxUint64 - 1, "a", math.MaxUint64, "b", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, Accept(tc.current, tc.currentOwner, tc.presented, tc.owner))
			err := Check("res", tc.current, tc.currentOwner, tc.presented, tc.owner)
			if tc.want {
				require.NoError(t, err)
				return
			}
			if tc.presented == None {
				require.ErrorIs(t, err, ErrNoToken)
				require.NotErrorIs(t, err, ErrStaleToken)
				return
			}
			require.ErrorIs(t, err, ErrStaleToken)
			var stale *StaleTokenError
			require.ErrorAs(t, err, &stale)
			require.Equal(t, StaleTokenError{Resource: "res", Presented: tc.presented, Current: tc.current}, *stale)
		})
	}
}

func TestStaleTokenErrorWrapped(t *testing.T) {
	t.Parallel()
	err := fmtWrap(&StaleTokenError{Resource: "r", Presented: 3, Current: 7})
	require.ErrorIs(t, err, ErrStaleToken)
	var stale *StaleTokenError
	require.ErrorAs(t, err, &stale)
	require.Equal(t, Token(7), stale.Current)
	require.Contains(t, err.Error(), "presented 3, current 7")
	require.Contains(t, (&StaleTokenError{Resource: "r", Presented: 7, Current: 7}).Error(), "another owner")
}

func fmtWrap(err error) error { return errors.Join(errors.New("sink"), err) }

func TestParseToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want Token
		ok   bool
	}{
		{"1", 1, true},
		{"0", 0, true},
		{"1780000000000000", 1780000000000000, true},
		{"18446744073709551615", math.MaxUint64, true},
		{"18446744073709551616", 0, false},
		{"", 0, false},
		{"01", 0, false},
		{"+1", 0, false},
		{"-1", 0, false},
		{" 1", 0, false},
		{"1 ", 0, false},
		{"1.0", 0, false},
		{"0x10", 0, false},
		{"123456789012345678901", 0, false},
		{"１", 0, false},
	} {
		got, err := ParseToken(tc.in)
		if !tc.ok {
			require.ErrorIs(t, err, ErrInvalidToken, "ParseToken(%q)", tc.in)
			continue
		}
		require.NoError(t, err, "ParseToken(%q)", tc.in)
		require.Equal(t, tc.want, got)
		require.Equal(t, tc.in, got.String(), "round trip")
	}
}

func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"1", "0", "18446744073709551615", "01", "-1", "", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := ParseToken(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		// Only canonical decimal text parses, and it round-trips exactly.
		if tok.String() != s {
			t.Fatalf("ParseToken(%q) = %d, formats as %q", s, tok, tok.String())
		}
		if v, err := strconv.ParseUint(s, 10, 64); err != nil || Token(v) != tok {
			t.Fatalf("ParseToken(%q) = %d, strconv says %d, %v", s, tok, v, err)
		}
	})
}

func TestContextCarriage(t *testing.T) {
	t.Parallel()
	_, ok := HolderFromContext(context.Background())
	require.False(t, ok)
	_, ok = HolderFromContext(WithHolder(context.Background(), Holder{Scope: "job", Token: None, Owner: "a"}))
	require.False(t, ok, "None is not a token")
	h, ok := HolderFromContext(WithHolder(context.Background(), Holder{Scope: "job|tenant-a", Token: 42, Owner: "a"}))
	require.True(t, ok)
	require.Equal(t, Holder{Scope: "job|tenant-a", Token: 42, Owner: "a"}, h)
}

func TestHolderCheckReportsScope(t *testing.T) {
	t.Parallel()
	h := Holder{Scope: "settle|tenant-b", Token: 7, Owner: "a"}
	require.NoError(t, h.Check("/v1/charges", 6, "b"))
	require.NoError(t, h.Check("/v1/charges", 7, "a"), "the same holder again")
	err := h.Check("/v1/charges", 8, "b")
	var stale *StaleTokenError
	require.ErrorAs(t, err, &stale)
	require.Equal(t, StaleTokenError{Resource: "/v1/charges", Scope: "settle|tenant-b", Presented: 7, Current: 8}, *stale)
	require.EqualError(t, err, `fence: stale fencing token for "/v1/charges" (scope "settle|tenant-b"): presented 7, current 8`)
	require.ErrorIs(t, Holder{Scope: "s", Owner: "a"}.Check("r", 0, ""), ErrNoToken)
}
