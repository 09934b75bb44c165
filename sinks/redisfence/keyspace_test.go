package redisfence_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/redisfence"
)

// TestResourceCannotReachAFence is the reproduction of issue 31 §2: a
// holder of the resource named like acct:1's fence key (K + ":fence" in
// the layout before the fence key space) writes it with Set (a short
// TTL, and plain) or HSet (fields token and owner). acct:1's fence is
// untouched: the stale holder's next write is still refused, and acct:1
// stays writable by its holder.
func TestResourceCannotReachAFence(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		for _, write := range []struct {
			name string
			fn   func(key string, h fence.Holder) error
		}{
			{"SetShortTTL", func(key string, h fence.Holder) error { return b.w.Set(ctx, key, "x", h, time.Millisecond) }},
			{"SetPlain", func(key string, h fence.Holder) error { return b.w.Set(ctx, key, "x", h, 0) }},
			{"HSetTokenOwner", func(key string, h fence.Holder) error {
				return b.w.HSet(ctx, key, map[string]string{"token": "1", "owner": "attacker"}, h)
			}},
		} {
			key := b.prefix + write.name + ":{acct:1}"
			require.NoError(t, b.w.Set(ctx, key, "v100", fence.Holder{Token: 100, Owner: "holder"}, 0))
			requireStale(t, b.w.Set(ctx, key, "v50-STALE", fence.Holder{Token: 50, Owner: "stale"}, 0), key, 50, 100)

			require.NoError(t, write.fn(key+":fence", fence.Holder{Token: 1, Owner: "attacker"}), write.name)
			require.NoError(t, write.fn(key+redisfence.FenceKey(key), fence.Holder{Token: 1, Owner: "attacker"}), write.name)

			requireStale(t, b.w.Set(ctx, key, "v50-STALE", fence.Holder{Token: 50, Owner: "stale"}, 0), key, 50, 100)
			requireStale(t, b.w.Set(ctx, key, "v100-OTHER", fence.Holder{Token: 100, Owner: "attacker"}, 0), key, 100, 100)
			require.Equal(t, "v100", b.rdb.Get(ctx, key).Val(), write.name)
			require.NoError(t, b.w.Set(ctx, key, "v100-again", fence.Holder{Token: 100, Owner: "holder"}, 0), "%s: the holder still writes", write.name)
			tok, owner, err := b.w.Current(ctx, key, "")
			require.NoError(t, err)
			require.Equal(t, fence.Token(100), tok)
			require.Equal(t, "holder", owner)
		}
	})
}

// TestReservedKeysRefused: no resource key (nor any key of Eval) may lie
// in the fence key space; such a write is refused before Redis with an
// error matching ErrReservedKey and ErrInvalidKey, and nothing is
// written.
func TestReservedKeysRefused(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		key := b.prefix + "{reserved}"
		h := fence.Holder{Token: 100, Owner: "holder"}
		require.NoError(t, b.w.Set(ctx, key, "v100", h, 0))
		fk := redisfence.FenceKey(key)
		require.True(t, strings.HasPrefix(fk, redisfence.FencePrefix), fk)

		attacker := fence.Holder{Token: 1, Owner: "attacker"}
		for name, err := range map[string]error{
			"Set":     b.w.Set(ctx, fk, "x", attacker, 0),
			"HSet":    b.w.HSet(ctx, fk, map[string]string{"token": "1"}, attacker),
			"Eval":    evalErr(b.w.Eval(ctx, redisfence.NewScript(`return 1`), []string{fk}, attacker)),
			"EvalArg": evalErr(b.w.Eval(ctx, redisfence.NewScript(`redis.call('DEL', KEYS[2]) return 1`), []string{key + ":x", fk}, attacker)),
			"Prefix":  b.w.Set(ctx, redisfence.FencePrefix+"anything", "x", attacker, 0),
		} {
			require.ErrorIs(t, err, redisfence.ErrReservedKey, name)
			require.ErrorIs(t, err, redisfence.ErrInvalidKey, name)
		}
		require.ErrorIs(t, currentErr(b.w.Current(ctx, fk, "")), redisfence.ErrReservedKey)
		requireStale(t, b.w.Set(ctx, key, "v50", fence.Holder{Token: 50, Owner: "stale"}, 0), key, 50, 100)
		require.Equal(t, map[string]string{"token": "100", "owner": "holder"}, b.rdb.HGetAll(ctx, fk).Val())
	})
}

// TestFenceKeysInjective: FenceKey is injective, never a key a resource
// may have, and keeps a tagged key's hash tag (a key without one needs
// none: the Writer refuses it on Cluster).
func TestFenceKeysInjective(t *testing.T) {
	t.Parallel()
	keys := []string{"a", "a:fence", "{a}", "{a}:fence", "x{a}", "{a}x", "{}a", "{a}}", "{{a}", "a}", "{", "}{a}",
		redisfence.FencePrefix + "{}:a", "{}:a", ":a", "a{b}c{d}"}
	seen := map[string]string{}
	for _, k := range keys {
		fk := redisfence.FenceKey(k)
		require.True(t, strings.HasPrefix(fk, redisfence.FencePrefix), fk)
		prev, dup := seen[fk]
		require.False(t, dup, "%q and %q share fence key %q", prev, k, fk)
		seen[fk] = k
		if tagged(k) {
			require.Equal(t, keySlot(k), keySlot(fk), "%q and %q", k, fk)
		}
	}
	for _, k := range keys {
		_, isFence := seen[k]
		require.False(t, isFence && !strings.HasPrefix(k, redisfence.FencePrefix), "resource %q is a fence key", k)
	}
}

// tagged reports whether Redis Cluster hashes key by a hash tag.
func tagged(key string) bool {
	open := strings.IndexByte(key, '{')
	return open >= 0 && strings.IndexByte(key[open+1:], '}') > 0
}
