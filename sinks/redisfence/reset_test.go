package redisfence_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/redisfence"
)

// Reset removes one scope's fence when it still holds the inspected token;
// the next legitimate holder, below the forged token, is then accepted, and
// the other scopes and the value are untouched.
func TestResetRemovesAPoisonedFence(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		key := b.prefix + "payouts"
		require.NoError(t, b.w.Set(ctx, key, "a", fence.Holder{Scope: "push", Token: 1000, Owner: "holder-a"}, 0))
		require.NoError(t, b.w.Set(ctx, key, "x", fence.Holder{Token: 5, Owner: "holder-x"}, 0))
		require.NoError(t, b.w.Set(ctx, key, "evil", fence.Holder{Scope: "push", Token: 9_000_000, Owner: "evil"}, 0))
		require.ErrorIs(t, b.w.Set(ctx, key, "b", fence.Holder{Scope: "push", Token: 1001, Owner: "holder-b"}, 0), fence.ErrStaleToken)

		got, err := b.w.Reset(ctx, key, "absent", fence.None)
		require.NoError(t, err)
		require.Equal(t, fence.None, got)
		got, err = b.w.Reset(ctx, key, "push", 8_999_999)
		require.ErrorIs(t, err, redisfence.ErrFenceChanged)
		require.Equal(t, fence.Token(9_000_000), got)
		cur, _, err := b.w.Current(ctx, key, "push")
		require.NoError(t, err)
		require.Equal(t, fence.Token(9_000_000), cur, "a refused reset changes nothing")

		got, err = b.w.Reset(ctx, key, "push", 9_000_000)
		require.NoError(t, err)
		require.Equal(t, fence.Token(9_000_000), got)
		require.NoError(t, b.w.Set(ctx, key, "b", fence.Holder{Scope: "push", Token: 1001, Owner: "holder-b"}, 0), "the next holder is accepted")
		require.ErrorIs(t, b.w.Set(ctx, key, "a", fence.Holder{Scope: "push", Token: 1000, Owner: "holder-a"}, 0), fence.ErrStaleToken, "and fences again")
		other, _, err := b.w.Current(ctx, key, "")
		require.NoError(t, err)
		require.Equal(t, fence.Token(5), other, "scope \"\" is untouched")

		_, err = b.w.Reset(ctx, "", "push", fence.None)
		require.ErrorIs(t, err, redisfence.ErrInvalidKey)
	})
}
