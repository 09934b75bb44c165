package redisfence_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/sinks/redisfence"
	"github.com/holdfast-go/holdfast/sinks/sinktest"
)

// slotScopeCases are scopes at the edges of the slot-scope rule
// (fence.SplitSlotScope) with what it makes of them: the Lua parse of
// every script (slotscope.lua) must agree byte for byte.
var slotScopeCases = []struct {
	scope string
	unit  string
	at    int64
	ok    bool
}{
	{scope: "settle|eu@1772928000", unit: "settle|eu", at: 1772928000, ok: true},
	{scope: "a@0", unit: "a", at: 0, ok: true},
	{scope: "a@-5", unit: "a", at: -5, ok: true},
	{scope: "a@b@5", unit: "a@b", at: 5, ok: true},
	{scope: "a@@5", unit: "a@", at: 5, ok: true},
	{scope: "@@5", unit: "@", at: 5, ok: true},
	{scope: "a@123456789012345", unit: "a", at: 123456789012345, ok: true},   // 15 digits, the most
	{scope: "a@-999999999999999", unit: "a", at: -999999999999999, ok: true}, // the lowest slot
	{scope: "a\x00b\n@5", unit: "a\x00b\n", at: 5, ok: true},                 // any byte in the unit
	{scope: "a@-0"}, {scope: "a@007"}, {scope: "a@00"}, {scope: "a@-05"}, // not canonical
	{scope: "a@1234567890123456"}, {scope: "a@-1234567890123456"}, // 16 digits
	{scope: "a@9007199254740993"},                                       // above 2^53
	{scope: "a@+5"}, {scope: "a@5 "}, {scope: "a@ 5"}, {scope: "a@5\n"}, // not digits alone
	{scope: "a@5\x00"}, {scope: "a@1e3"}, {scope: "a@0x10"}, {scope: "a@5.0"}, // what tonumber would read
	{scope: "a@\u0663"}, // a non-ASCII digit
	{scope: "@5"}, {scope: "a@"}, {scope: "a@-"}, {scope: "a@5@"}, {scope: "a@5@x"},
	{scope: "a"}, {scope: "@"}, {scope: ""},
}

// The parse in Lua (slotscope.lua, run alone) and fence.SplitSlotScope
// agree on every edge case, on Redis and on miniredis (gopher-lua).
func TestSlotScopeParseInLuaAgreesWithGo(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		for _, c := range slotScopeCases {
			unit, at, ok := fence.SplitSlotScope(c.scope)
			require.Equal(t, []any{c.ok, c.unit, c.at}, []any{ok, unit, at}, "Go: %q", c.scope)
			unit, at, ok, err := redisfence.SplitSlotScopeInLua(t.Context(), b.rdb, c.scope)
			require.NoError(t, err, "%q", c.scope)
			require.Equal(t, []any{c.ok, c.unit, c.at}, []any{ok, unit, at}, "Lua: %q", c.scope)
		}
	})
}

// FuzzSlotScopeParseInLua holds the Lua parse to fence.SplitSlotScope on
// any scope, on the real Redis (go test -fuzz FuzzSlotScopeParseInLua).
func FuzzSlotScopeParseInLua(f *testing.F) {
	for _, c := range slotScopeCases {
		f.Add(c.scope)
	}
	rdb := redistest.Real(f)
	f.Fuzz(func(t *testing.T, scope string) {
		unit, at, ok := fence.SplitSlotScope(scope)
		lunit, lat, lok, err := redisfence.SplitSlotScopeInLua(t.Context(), rdb, scope)
		require.NoError(t, err)
		require.Equal(t, []any{ok, unit, at}, []any{lok, lunit, lat}, "%q", scope)
	})
}

// The same cases through the writes and PruneSlotScopes: a scope is
// closed by its own unit's watermark above its slot, and by nothing else
// (another split of it, the scope itself as a unit, at any watermark the
// server takes). A slot the server's clock has not left fence.PruneMargin
// behind cannot be closed: the cutoff that would close it is refused.
func TestPruneAndWritesParseScopesAsGoDoes(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		// The latest cutoff the server takes, with a minute to spare.
		latest := time.Now().Add(-fence.PruneMargin - time.Minute)
		for i, c := range slotScopeCases {
			key := fmt.Sprintf("%sparse:%d", b.prefix, i)
			h := fence.Holder{Scope: c.scope, Token: 10, Owner: "a"}
			require.NoError(t, b.w.Set(ctx, key, "v", h, 0), "%q", c.scope)
			var others []string
			if first, _, found := strings.Cut(c.scope, "@"); found {
				others = append(others, first)
			}
			if last := strings.LastIndex(c.scope, "@"); last >= 0 {
				others = append(others, c.scope[:last])
			}
			for _, u := range append(others, c.scope) {
				if u == "" || (c.ok && u == c.unit) {
					continue
				}
				n, err := b.w.PruneSlotScopes(ctx, key, u, latest)
				require.NoError(t, err)
				require.Zero(t, n, "%q: unit %q pruned it", c.scope, u)
			}
			require.NoError(t, b.w.Set(ctx, key, "v", h, 0), "%q: closed by another unit", c.scope)
			requireStaleNotClosed(t, b.w.Set(ctx, key, "v", fence.Holder{Scope: c.scope, Token: 9, Owner: "b"}, 0), c.scope)
			if !c.ok {
				continue
			}
			if time.Unix(c.at+1, 0).After(latest) {
				_, err := b.w.PruneSlotScopes(ctx, key, c.unit, time.Unix(c.at+1, 0))
				require.ErrorIs(t, err, fence.ErrPruneCutoff, "%q", c.scope)
				require.NoError(t, b.w.Set(ctx, key, "v", h, 0), "%q: closed by a refused prune", c.scope)
				continue
			}
			n, err := b.w.PruneSlotScopes(ctx, key, c.unit, time.Unix(c.at, 0))
			require.NoError(t, err)
			require.Zero(t, n, "%q: pruned at its own slot", c.scope)
			require.NoError(t, b.w.Set(ctx, key, "v", h, 0), "%q: closed at its own slot", c.scope)
			n, err = b.w.PruneSlotScopes(ctx, key, c.unit, time.Unix(c.at+1, 0))
			require.NoError(t, err)
			require.Equal(t, 1, n, "%q", c.scope)
			requireClosed(t, b.w.Set(ctx, key, "v", fence.Holder{Scope: c.scope, Token: 11, Owner: "a"}, 0), key, c.scope, 11, c.at+1)
		}
	})
}

// requireClosed checks the refusal of a write under a closed slot scope:
// fence.ClosedScopeError, in full.
func requireClosed(t *testing.T, err error, key, scope string, presented fence.Token, before int64) {
	t.Helper()
	require.ErrorIs(t, err, fence.ErrStaleToken)
	require.ErrorIs(t, err, fence.ErrScopeClosed)
	var stale *fence.StaleTokenError
	require.ErrorAs(t, err, &stale)
	require.Equal(t, *fence.ClosedScopeError(key, fence.Holder{Scope: scope, Token: presented}, before), *stale)
}

func requireStaleNotClosed(t *testing.T, err error, scope string) {
	t.Helper()
	require.ErrorIs(t, err, fence.ErrStaleToken, "%q", scope)
	require.NotErrorIs(t, err, fence.ErrScopeClosed, "%q", scope)
}

// After PruneSlotScopes, Set, HSet and Eval all refuse a pruned slot's
// holders and any token under its scope, write nothing (an Eval body does
// not run), and leave the later slots fenced as before. The fence hash
// holds the watermark and the later slot's fence, nothing else.
func TestPrunedSlotScopeRefusesEveryWritePath(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		const unit = "settle|eu"
		base := time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC).Unix()
		slot := func(i int64) string { return fmt.Sprintf("%s@%d", unit, base+i*3600) }
		key, hkey := b.prefix+"payouts:{eu}", b.prefix+"payouts:{eu}:h"
		logScript := redisfence.NewScript("redis.call('RPUSH', KEYS[2], ARGV[1]) return redis.call('SET', KEYS[1], ARGV[1])")
		writes := map[string]func(h fence.Holder, v string) (string, error){
			"Set": func(h fence.Holder, v string) (string, error) { return key, b.w.Set(ctx, key, v, h, 0) },
			"HSet": func(h fence.Holder, v string) (string, error) {
				return hkey, b.w.HSet(ctx, hkey, map[string]string{"v": v}, h)
			},
			"Eval": func(h fence.Holder, v string) (string, error) {
				_, err := b.w.Eval(ctx, logScript, []string{key, key + ":log"}, h, v)
				return key, err
			},
		}
		a := fence.Holder{Scope: slot(0), Token: 1780000000000100, Owner: "a"}
		bb := fence.Holder{Scope: slot(0), Token: a.Token + 1, Owner: "b"}
		c := fence.Holder{Scope: slot(1), Token: 1780000000000200, Owner: "c"}
		for _, name := range []string{"Set", "HSet"} { // Eval writes Set's key
			for _, h := range []fence.Holder{a, bb, c} {
				_, err := writes[name](h, "ok")
				require.NoError(t, err, name)
			}
		}
		_, err := writes["Eval"](c, "ok")
		require.NoError(t, err)
		for _, k := range []string{key, hkey} {
			n, err := b.w.PruneSlotScopes(ctx, k, unit, time.Unix(base+3600, 0))
			require.NoError(t, err)
			require.Equal(t, 1, n, "slot 0's fence, %s", k)
		}
		logLen := b.rdb.LLen(ctx, key+":log").Val()

		for name, write := range writes {
			for _, h := range []fence.Holder{a, bb, {Scope: slot(0), Token: bb.Token + 1_000_000, Owner: "n"}} {
				k, err := write(h, "late")
				requireClosed(t, err, k, slot(0), h.Token, base+3600)
				require.ErrorContains(t, err, "closed", name)
			}
			k, err := write(fence.Holder{Scope: slot(-1), Token: 1, Owner: "never"}, "late")
			requireClosed(t, err, k, slot(-1), 1, base+3600)
			_, err = write(fence.Holder{Scope: slot(1), Token: c.Token - 1, Owner: "d"}, "late")
			requireStaleNotClosed(t, err, slot(1))
			_, err = write(c, "ok")
			require.NoError(t, err, "%s: slot 1 is not pruned", name)
		}
		require.Equal(t, "ok", b.rdb.Get(ctx, key).Val(), "no refused write landed")
		require.Equal(t, "ok", b.rdb.HGet(ctx, hkey, "v").Val())
		require.Equal(t, logLen+1, b.rdb.LLen(ctx, key+":log").Val(), "the Eval body ran for slot 1's holder alone")

		require.Equal(t, map[string]string{
			"closed:" + unit:   strconv.FormatInt(base+3600, 10),
			"token:" + slot(1): c.Token.String(), "owner:" + slot(1): "c",
		}, b.rdb.HGetAll(ctx, redisfence.FenceKey(key)).Val(), "the documented layout")

		tok, _, err := b.w.Current(ctx, key, slot(0))
		require.NoError(t, err)
		require.Equal(t, fence.None, tok, "the pruned fence is gone")
		tok, err = b.w.Reset(ctx, key, slot(0), fence.None)
		require.NoError(t, err)
		require.Equal(t, fence.None, tok)
		requireClosed(t, b.w.Set(ctx, key, "late", a, 0), key, slot(0), a.Token, base+3600)
	})
}

// The watermark only rises, is whole seconds (before.Unix()), and is
// clamped to -10^15 s, which closes the same slots (none). A cutoff far in
// the future is refused (fence.ErrPruneCutoff), writing nothing.
func TestPruneWatermark(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		prune := func(key string, before time.Time) {
			t.Helper()
			_, err := b.w.PruneSlotScopes(ctx, key, "u", before)
			require.NoError(t, err)
		}
		write := func(key, scope string) error {
			return b.w.Set(ctx, key, "v", fence.Holder{Scope: scope, Token: 1, Owner: "a"}, 0)
		}

		key := b.prefix + "rises"
		prune(key, time.Unix(100, 999_999_999))
		prune(key, time.Unix(50, 0))
		requireClosed(t, write(key, "u@99"), key, "u@99", 1, 100)
		require.NoError(t, write(key, "u@100"))
		require.NoError(t, write(key, "v@5"), "another unit")
		require.Equal(t, "100", b.rdb.HGet(ctx, redisfence.FenceKey(key), "closed:u").Val())

		key = b.prefix + "far-future"
		_, err := b.w.PruneSlotScopes(ctx, key, "u", time.Unix(1<<62, 0))
		require.ErrorIs(t, err, fence.ErrPruneCutoff)
		require.Zero(t, b.rdb.Exists(ctx, redisfence.FenceKey(key)).Val(), "nothing written")
		require.NoError(t, write(key, "u@999999999999999"))
		require.NoError(t, write(key, "u@-999999999999999"))

		key = b.prefix + "far-past"
		prune(key, time.Unix(-1<<62, 0))
		require.Equal(t, "-1000000000000000", b.rdb.HGet(ctx, redisfence.FenceKey(key), "closed:u").Val())
		require.NoError(t, write(key, "u@-999999999999999"))
		year1900 := time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
		prune(key, year1900)
		requireClosed(t, write(key, "u@-2208988801"), key, "u@-2208988801", 1, year1900.Unix())
		require.NoError(t, write(key, "u@-2208988800"))
	})
}

func TestPruneSlotScopesBadInputNeverReachesRedis(t *testing.T) {
	t.Parallel()
	w := newWriter(t, untouchable{t: t})
	ctx := t.Context()
	var nilCtx context.Context // misuse: an error, never a panic
	now := time.Now()
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}}) // never dialed
	t.Cleanup(func() { _ = cluster.Close() })
	wc := newWriter(t, cluster)
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"EmptyUnit", pruneErr(w.PruneSlotScopes(ctx, "k", "", now)), redisfence.ErrInvalidUnit},
		{"EmptyKey", pruneErr(w.PruneSlotScopes(ctx, "", "u", now)), redisfence.ErrInvalidKey},
		{"ReservedKey", pruneErr(w.PruneSlotScopes(ctx, redisfence.FenceKey("k"), "u", now)), redisfence.ErrReservedKey},
		{"ClusterKeyWithoutTag", pruneErr(wc.PruneSlotScopes(ctx, "k", "u", now)), redisfence.ErrInvalidKey},
		{"NilContext", pruneErr(w.PruneSlotScopes(nilCtx, "k", "u", now)), redisfence.ErrNilContext},
		{"NilWriter", pruneErr((*redisfence.Writer)(nil).PruneSlotScopes(ctx, "k", "u", now)), redisfence.ErrNotCreated},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, tt.err, tt.want)
		})
	}
}

func pruneErr(_ int, err error) error { return err }

// naivePruneSink is the negative control of PruneSlotScopes: it deletes
// the pruned slots' fences (HDEL of their token: and owner: fields) and
// keeps no watermark, so a pruned slot's scope reads as never written.
type naivePruneSink struct{ *setSink }

func (s naivePruneSink) PruneSlotScopes(ctx context.Context, resource, unit string, before time.Time) (int, error) {
	key := redisfence.FenceKey(s.prefix + resource)
	fields, err := s.rdb.HKeys(ctx, key).Result()
	if err != nil {
		return 0, err
	}
	var gone []string
	for _, f := range fields {
		scope, ok := strings.CutPrefix(f, "token:")
		if u, at, slot := fence.SplitSlotScope(scope); ok && slot && u == unit && at < before.Unix() {
			gone = append(gone, f, "owner:"+scope)
		}
	}
	if len(gone) > 0 {
		if err := s.rdb.HDel(ctx, key, gone...).Err(); err != nil {
			return 0, err
		}
	}
	return len(gone) / 2, nil
}

// Deleting the fences without the watermark lets a pruned slot's stale
// holder write again; CheckSlotScopesClose reports it, and passes the
// real PruneSlotScopes on the same Redis.
func TestNaivePruneLetsAStaleHolderBackIn(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		s := &setSink{rdb: b.rdb, w: b.w, prefix: b.prefix}
		err := sinktest.CheckSlotScopesClose(t.Context(), naivePruneSink{s}, "naive")
		require.ErrorContains(t, err, "ACCEPTED")
		t.Logf("the naive prune, as expected: %v", err)
		require.NoError(t, sinktest.CheckSlotScopesClose(t.Context(), s, "pruned"))
	})
}

// The fence hash of a resource written under a new slot scope every slot
// grows by one fence per slot until pruned, and stays at the kept slots'
// fences and one watermark field when pruned as it goes. It logs the
// bytes per slot scope (MEMORY USAGE) on a redis-server of its own, under
// the two usual limits of a small hash: redis-server's built-in
// hash-max-listpack-entries (512: 200 slot scopes stay a listpack) and
// the 128 of the shipped redis.conf (they become a hash table).
func TestPruneBoundsTheFenceHash(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"BuiltinListpackLimit", nil},
		{"RedisConfListpackLimit128", []string{"--hash-max-listpack-entries", "128"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pruneBoundsTheFenceHash(t, redisproc.Start(t, tc.args...).Client(t))
		})
	}
}

func pruneBoundsTheFenceHash(t *testing.T, rdb redis.UniversalClient) {
	w := newWriter(t, rdb)
	ctx := t.Context()
	const (
		unit  = "settle|eu"
		slots = 200
		keep  = 10
	)
	base := time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC)
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Hour) }
	holder := func(i int) fence.Holder {
		// A lease's token (µs-based) and owner (128 bits in hex).
		return fence.Holder{Scope: fmt.Sprintf("%s@%d", unit, at(i).Unix()), Token: 1796473899746149 + fence.Token(i),
			Owner: fmt.Sprintf("%032x", 0xfeedface+i)}
	}
	measure := func(key string) (fields, bytes int64, encoding string) {
		t.Helper()
		fields, err := rdb.HLen(ctx, redisfence.FenceKey(key)).Result()
		require.NoError(t, err)
		bytes, err = rdb.MemoryUsage(ctx, redisfence.FenceKey(key), 0).Result()
		require.NoError(t, err)
		encoding, err = rdb.ObjectEncoding(ctx, redisfence.FenceKey(key)).Result()
		require.NoError(t, err)
		return fields, bytes, encoding
	}

	// Unpruned, then pruned at once to the last keep slots.
	const grown = "grown:{eu}"
	for i := range slots {
		require.NoError(t, w.Set(ctx, grown, "v", holder(i), 0))
	}
	fields1, bytes1, enc1 := measure(grown)
	require.Equal(t, int64(2*slots), fields1, "a token and an owner field per slot")
	n, err := w.PruneSlotScopes(ctx, grown, unit, at(slots-keep))
	require.NoError(t, err)
	require.Equal(t, slots-keep, n)
	fields2, bytes2, enc2 := measure(grown)
	require.Equal(t, int64(2*keep+1), fields2, "the kept slots' fences and the watermark")

	// Pruned as it goes: never more than keep slots' fences.
	const rolling = "rolling:{eu}"
	for i := range slots {
		require.NoError(t, w.Set(ctx, rolling, "v", holder(i), 0))
		if i+1 >= keep {
			_, err := w.PruneSlotScopes(ctx, rolling, unit, at(i+1-keep))
			require.NoError(t, err)
		}
		fields, _, _ := measure(rolling)
		require.LessOrEqual(t, fields, int64(2*keep+1), "slot %d", i)
	}
	fields3, bytes3, enc3 := measure(rolling)
	require.Equal(t, int64(2*keep+1), fields3)
	for i := range slots - keep {
		requireClosed(t, w.Set(ctx, rolling, "v", holder(i), 0), rolling, holder(i).Scope, holder(i).Token, at(slots-keep).Unix())
	}

	t.Logf("fence hash of %d slot scopes, unpruned: %d fields, %d bytes, %s (%d per slot scope); pruned to the last %d: "+
		"%d fields, %d bytes, %s (%d freed per pruned slot scope); pruned as it goes: %d fields, %d bytes, %s "+
		"(the %d kept slot scopes and the watermark)",
		slots, fields1, bytes1, enc1, bytes1/slots, keep, fields2, bytes2, enc2, (bytes1-bytes2)/(slots-keep),
		fields3, bytes3, enc3, keep)
}

// On Redis Cluster the prune script runs where the resource's fence key
// lives (its hash tag's slot), and writes there see its watermark.
func TestPruneSlotScopesOnCluster(t *testing.T) {
	t.Parallel()
	rdb := redisproc.StartCluster(t, 3).Client(t)
	w := newWriter(t, rdb)
	ctx := t.Context()
	for _, key := range []string{"payouts:{a}", "payouts:{b}", "payouts:{c}"} { // three nodes
		h := fence.Holder{Scope: "settle|eu@1772928000", Token: 7, Owner: "a"}
		require.NoError(t, w.Set(ctx, key, "v", h, 0))
		n, err := w.PruneSlotScopes(ctx, key, "settle|eu", time.Unix(1772928001, 0))
		require.NoError(t, err)
		require.Equal(t, 1, n, key)
		requireClosed(t, w.Set(ctx, key, "late", h, 0), key, h.Scope, h.Token, 1772928001)
		require.Equal(t, "v", rdb.Get(ctx, key).Val())
	}
}

// A cutoff later than Redis's clock minus fence.PruneMargin is refused
// with a *fence.PruneCutoffError and changes nothing: the fence hash is
// as it was (no watermark, every fence), and the slot just below the
// refused cutoff takes its holder's writes. An older cutoff prunes as
// before.
func TestPruneSlotScopesRefusesACutoffOfSlotsThatMayStillRun(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		const unit = "settle|eu"
		key := b.prefix + "payouts"
		now := time.Now()
		old := fence.Holder{Scope: fmt.Sprintf("%s@%d", unit, now.Add(-3*fence.PruneMargin).Unix()), Token: 5, Owner: "a"}
		recent := fence.Holder{Scope: fmt.Sprintf("%s@%d", unit, now.Add(-time.Second).Unix()), Token: 7, Owner: "b"}
		require.NoError(t, b.w.Set(ctx, key, "v", old, 0))
		require.NoError(t, b.w.Set(ctx, key, "v", recent, 0))
		fields := b.rdb.HGetAll(ctx, redisfence.FenceKey(key)).Val()

		for _, cutoff := range []time.Time{now.Add(time.Hour), now, now.Add(-fence.PruneMargin + time.Minute)} {
			n, err := b.w.PruneSlotScopes(ctx, key, unit, cutoff)
			sinktest.RequirePruneCutoffRefused(t, err, n, key, cutoff, now, "Redis's clock")
			require.Equal(t, fields, b.rdb.HGetAll(ctx, redisfence.FenceKey(key)).Val(), "nothing changed")
		}
		require.NoError(t, b.w.Set(ctx, key, "v", recent, 0), "the slot below the refused cutoff is open")
		requireStaleNotClosed(t, b.w.Set(ctx, key, "v", fence.Holder{Scope: recent.Scope, Token: 6, Owner: "c"}, 0), recent.Scope)
		require.NoError(t, b.w.Set(ctx, key, "v", old, 0))

		cutoff := now.Add(-fence.PruneMargin - time.Minute)
		n, err := b.w.PruneSlotScopes(ctx, key, unit, cutoff)
		require.NoError(t, err, "a cutoff older than the limit")
		require.Equal(t, 1, n, "the old slot's fence")
		requireClosed(t, b.w.Set(ctx, key, "v", old, 0), key, old.Scope, old.Token, cutoff.Unix())
		require.NoError(t, b.w.Set(ctx, key, "v", recent, 0))
	})
}

// Redis's clock decides, not the caller's: on a miniredis whose clock is
// two days behind, a cutoff two hours behind the caller's clock is
// refused, naming the server's clock; two days ahead, a cutoff of the
// caller's now is taken.
func TestPruneSlotScopesCutoffIsCheckedOnRedisClock(t *testing.T) {
	t.Parallel()
	mr, rdb := redistest.MiniServer(t)
	w := newWriter(t, rdb)
	ctx := t.Context()
	now := time.Now()

	behind := now.Add(-48 * time.Hour).Truncate(time.Microsecond)
	mr.SetTime(behind)
	cutoff := now.Add(-2 * fence.PruneMargin)
	_, err := w.PruneSlotScopes(ctx, "payouts", "u", cutoff)
	var ce *fence.PruneCutoffError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, fence.PruneCutoffError{Before: cutoff, Limit: behind.UTC().Add(-fence.PruneMargin), Now: behind.UTC(), Margin: fence.PruneMargin}, *ce)
	require.Zero(t, rdb.Exists(ctx, redisfence.FenceKey("payouts")).Val(), "nothing written")

	mr.SetTime(now.Add(48 * time.Hour))
	_, err = w.PruneSlotScopes(ctx, "payouts", "u", now)
	require.NoError(t, err)
	require.Equal(t, strconv.FormatInt(now.Unix(), 10), rdb.HGet(ctx, redisfence.FenceKey("payouts"), "closed:u").Val())
}
