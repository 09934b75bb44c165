package fence_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
)

func TestSplitSlotScope(t *testing.T) {
	t.Parallel()
	cases := []struct {
		scope string
		unit  string
		at    int64
		ok    bool
	}{
		{"settle|eu@1780000000", "settle|eu", 1780000000, true},
		{"job@0", "job", 0, true},
		{"job@-5", "job", -5, true},
		{"a@b@5", "a@b", 5, true}, // the last '@' splits
		{"a@@5", "a@", 5, true},
		{"j@999999999999999", "j", 999999999999999, true}, // 15 digits
		{"j@-999999999999999", "j", -999999999999999, true},
		{"j@1234567890123456", "", 0, false}, // 16 digits
		{"@5", "", 0, false},                 // no unit
		{"job@", "", 0, false},
		{"job@-0", "", 0, false},
		{"job@007", "", 0, false},
		{"job@00", "", 0, false},
		{"job@+5", "", 0, false},
		{"job@5 ", "", 0, false},
		{"job@ 5", "", 0, false},
		{"job@1e3", "", 0, false},
		{"job@0x10", "", 0, false},
		{"job@٣", "", 0, false}, // an Arabic-Indic digit
		{"job@-", "", 0, false},
		{"job", "", 0, false},
		{"", "", 0, false},
	}
	for _, c := range cases {
		unit, at, ok := fence.SplitSlotScope(c.scope)
		require.Equal(t, c.ok, ok, "%q", c.scope)
		require.Equal(t, c.unit, unit, "%q", c.scope)
		require.Equal(t, c.at, at, "%q", c.scope)
	}
}

func TestClosedScopeError(t *testing.T) {
	t.Parallel()
	h := fence.Holder{Scope: "job@1780000000", Token: 7, Owner: "a"}
	err := fence.ClosedScopeError("orders", h, 1780000001)
	require.ErrorIs(t, err, fence.ErrStaleToken)
	require.ErrorIs(t, err, fence.ErrScopeClosed)
	require.Equal(t, time.Unix(1780000001, 0).UTC(), err.ClosedBefore)
	require.Equal(t, `fence: stale fencing token for "orders" (scope "job@1780000000"): the slot scope is closed, slots before 2026-05-28T20:26:41Z are pruned (presented 7)`, err.Error())

	stale := &fence.StaleTokenError{Resource: "orders", Scope: "job", Presented: 5, Current: 6}
	require.ErrorIs(t, stale, fence.ErrStaleToken)
	require.False(t, errors.Is(stale, fence.ErrScopeClosed), "a plain stale token is no closed scope")

	// A watermark at the zero time's second still reads as closed.
	zero := fence.ClosedScopeError("orders", h, time.Time{}.Unix())
	require.ErrorIs(t, zero, fence.ErrScopeClosed)
}
