package redisfence_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/redisfence"
)

// A fence key keeps one fence per scope: the tokens of two leases writing
// one key are never compared, and a stale holder of one lease is still
// refused. Set, HSet and Eval share the fences of a key.
func TestWritesKeepOneFencePerScope(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		key := b.prefix + "charges"
		a := fence.Holder{Scope: "settle|tenant-a", Token: 1780000000000900, Owner: "r1"}
		bb := fence.Holder{Scope: "settle|tenant-b", Token: 1780000000000100, Owner: "r2"}
		none := fence.Holder{Token: 3, Owner: "r3"}
		require.NoError(t, b.w.Set(ctx, key, "a", a, 0))
		require.NoError(t, b.w.Set(ctx, key, "b", bb, 0), "a smaller token of another lease is not stale")
		require.NoError(t, b.w.HSet(ctx, key+":h", map[string]string{"f": "v"}, bb))
		require.NoError(t, b.w.Set(ctx, key, "none", none, 0), "scope \"\" is a scope of its own")

		frozen := fence.Holder{Scope: "settle|tenant-a", Token: a.Token - 100, Owner: "r4"}
		for name, err := range map[string]error{
			"Set":  b.w.Set(ctx, key, "late", frozen, 0),
			"Eval": evalErr(b.w.Eval(ctx, redisfence.NewScript("return redis.call('SET', KEYS[1], 'late')"), []string{key}, frozen)),
		} {
			var stale *fence.StaleTokenError
			require.ErrorAs(t, err, &stale, name)
			require.Equal(t, fence.StaleTokenError{Resource: key, Scope: "settle|tenant-a", Presented: frozen.Token, Current: a.Token}, *stale, name)
		}
		got, err := b.rdb.Get(ctx, key).Result()
		require.NoError(t, err)
		require.Equal(t, "none", got, "the refused writes changed nothing")

		for _, h := range []fence.Holder{a, bb, none} {
			tok, owner, err := b.w.Current(ctx, key, h.Scope)
			require.NoError(t, err)
			require.Equal(t, h.Token, tok, h.Scope)
			require.Equal(t, h.Owner, owner, h.Scope)
		}
		fields, err := b.rdb.HGetAll(ctx, redisfence.FenceKey(key)).Result()
		require.NoError(t, err)
		require.Equal(t, map[string]string{
			"token": "3", "owner": "r3",
			"token:settle|tenant-a": a.Token.String(), "owner:settle|tenant-a": "r1",
			"token:settle|tenant-b": bb.Token.String(), "owner:settle|tenant-b": "r2",
		}, fields, "the documented layout")
	})
}
