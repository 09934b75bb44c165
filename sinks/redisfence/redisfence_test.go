package redisfence_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/sinks/redisfence"
)

// bundle is one test's setup: a Writer over one backend and a key prefix
// of the test's own.
type bundle struct {
	rdb    redis.UniversalClient
	w      *redisfence.Writer
	prefix string
}

// eachBackend runs fn as a parallel subtest per backend: real Redis and
// miniredis.
func eachBackend(t *testing.T, fn func(t *testing.T, b *bundle)) {
	t.Helper()
	for _, backend := range redistest.Backends() {
		t.Run(backend.Name, func(t *testing.T) {
			t.Parallel()
			rdb := backend.New(t)
			fn(t, &bundle{rdb: rdb, w: newWriter(t, rdb), prefix: redistest.Prefix(t, rdb)})
		})
	}
}

func requireStale(t *testing.T, err error, key string, presented, current fence.Token) {
	t.Helper()
	var stale *fence.StaleTokenError
	require.ErrorAs(t, err, &stale)
	require.ErrorIs(t, err, fence.ErrStaleToken)
	require.Equal(t, fence.StaleTokenError{Resource: key, Presented: presented, Current: current}, *stale)
}

func TestSetFollowsTheRule(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		key := b.prefix + "settlement"

		require.NoError(t, b.w.Set(ctx, key, "v10", fence.Holder{Token: 10, Owner: "a"}, 0))
		requireStale(t, b.w.Set(ctx, key, "v9", fence.Holder{Token: 9, Owner: "b"}, 0), key, 9, 10)
		requireStale(t, b.w.Set(ctx, key, "x", fence.Holder{Token: 10, Owner: "b"}, 0), key, 10, 10)
		require.NoError(t, b.w.Set(ctx, key, "v10-again", fence.Holder{Token: 10, Owner: "a"}, 0), "same holder again")
		require.Equal(t, "v10-again", b.rdb.Get(ctx, key).Val())

		require.NoError(t, b.w.Set(ctx, key, "v11", fence.Holder{Token: 11, Owner: "b"}, 0))
		require.Equal(t, "v11", b.rdb.Get(ctx, key).Val())
		tok, owner, err := b.w.Current(ctx, key, "")
		require.NoError(t, err)
		require.Equal(t, fence.Token(11), tok)
		require.Equal(t, "b", owner)

		// The layout is documented: a hash at FencePrefix + "{<tag>}:" + key.
		require.Equal(t, map[string]string{"token": "11", "owner": "b"}, b.rdb.HGetAll(ctx, redisfence.FencePrefix+"{}:"+key).Val())
	})
}

func TestTokensCompareExactlyBeyondFloatPrecision(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		key := b.prefix + "big"
		const p53 = fence.Token(1) << 53 // 2^53+1 is not a float64

		require.NoError(t, b.w.Set(ctx, key, "a", fence.Holder{Token: p53 + 1, Owner: "a"}, 0))
		requireStale(t, b.w.Set(ctx, key, "b", fence.Holder{Token: p53, Owner: "b"}, 0), key, p53, p53+1)
		require.NoError(t, b.w.Set(ctx, key, "c", fence.Holder{Token: p53 + 2, Owner: "c"}, 0))
		require.NoError(t, b.w.Set(ctx, key, "d", fence.Holder{Token: math.MaxUint64, Owner: "d"}, 0))
		requireStale(t, b.w.Set(ctx, key, "e", fence.Holder{Token: math.MaxUint64 - 1, Owner: "e"}, 0), key, math.MaxUint64-1, math.MaxUint64)

		// Shorter decimal is smaller, whatever its digits: 9 < 10.
		short := b.prefix + "digits"
		require.NoError(t, b.w.Set(ctx, short, "10", fence.Holder{Token: 10, Owner: "a"}, 0))
		requireStale(t, b.w.Set(ctx, short, "9", fence.Holder{Token: 9, Owner: "b"}, 0), short, 9, 10)
		require.NoError(t, b.w.Set(ctx, short, "100", fence.Holder{Token: 100, Owner: "b"}, 0))
	})
}

func TestSetTTL(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		key := b.prefix + "ttl"

		require.NoError(t, b.w.Set(ctx, key, "v", fence.Holder{Token: 1, Owner: "a"}, time.Hour))
		ttl := b.rdb.PTTL(ctx, key).Val()
		require.Greater(t, ttl, 59*time.Minute)
		require.LessOrEqual(t, ttl, time.Hour)
		require.Equal(t, time.Duration(-1), b.rdb.PTTL(ctx, redisfence.FenceKey(key)).Val(), "the fence key never expires")

		require.NoError(t, b.w.Set(ctx, key, "kept", fence.Holder{Token: 2, Owner: "a"}, redisfence.KeepTTL))
		require.Greater(t, b.rdb.PTTL(ctx, key).Val(), 59*time.Minute, "KeepTTL keeps it")
		require.Equal(t, "kept", b.rdb.Get(ctx, key).Val())

		require.NoError(t, b.w.Set(ctx, key, "forever", fence.Holder{Token: 3, Owner: "a"}, 0))
		require.Equal(t, time.Duration(-1), b.rdb.PTTL(ctx, key).Val(), "0 removes the TTL, as SET does")

		require.NoError(t, b.w.Set(ctx, key, "short", fence.Holder{Token: 4, Owner: "a"}, time.Microsecond))
		ttl = b.rdb.PTTL(ctx, key).Val()
		require.LessOrEqual(t, ttl, time.Millisecond, "below 1 ms rounds up to 1 ms")

		// A refused write leaves the TTL alone.
		require.NoError(t, b.w.Set(ctx, key, "v5", fence.Holder{Token: 5, Owner: "a"}, time.Hour))
		requireStale(t, b.w.Set(ctx, key, "old", fence.Holder{Token: 4, Owner: "b"}, time.Second), key, 4, 5)
		require.Greater(t, b.rdb.PTTL(ctx, key).Val(), 59*time.Minute)
	})
}

func TestHSet(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		key := b.prefix + "account:42"

		require.NoError(t, b.w.HSet(ctx, key, map[string]string{"balance": "100", "currency": "EUR"}, fence.Holder{Token: 7, Owner: "a"}))
		requireStale(t, b.w.HSet(ctx, key, map[string]string{"balance": "0"}, fence.Holder{Token: 6, Owner: "b"}), key, 6, 7)
		require.NoError(t, b.w.HSet(ctx, key, map[string]string{"balance": "90"}, fence.Holder{Token: 8, Owner: "b"}))
		require.Equal(t, map[string]string{"balance": "90", "currency": "EUR"}, b.rdb.HGetAll(ctx, key).Val())

		// More fields than Lua's unpack takes at once.
		many := map[string]string{}
		for i := range 5000 {
			many[string(rune('a'+i%26))+time.Duration(i).String()] = "x"
		}
		require.NoError(t, b.w.HSet(ctx, key, many, fence.Holder{Token: 9, Owner: "b"}))
		require.Equal(t, int64(len(many)+2), b.rdb.HLen(ctx, key).Val())
	})
}

func TestEval(t *testing.T) {
	t.Parallel()
	transfer := redisfence.NewScript(`
-- KEYS[1] the account, ARGV[1] the amount: the caller's own view.
local balance = tonumber(redis.call('GET', KEYS[1]) or '0') + tonumber(ARGV[1])
redis.call('SET', KEYS[1], balance)
return balance`)
	returnsNil := redisfence.NewScript(`redis.call('SET', KEYS[1], ARGV[1])`)
	echo := redisfence.NewScript(`return {KEYS, ARGV}`)
	fails := redisfence.NewScript(`return redis.error_reply('NOPE body refused')`)

	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		key := b.prefix + "{acct}"

		got, err := b.w.Eval(ctx, transfer, []string{key}, fence.Holder{Token: 5, Owner: "a"}, 30)
		require.NoError(t, err)
		require.Equal(t, int64(30), got)
		got, err = b.w.Eval(ctx, transfer, []string{key}, fence.Holder{Token: 4, Owner: "b"}, 1000)
		requireStale(t, err, key, 4, 5)
		require.Nil(t, got)
		require.Equal(t, "30", b.rdb.Get(ctx, key).Val(), "the body did not run")

		got, err = b.w.Eval(ctx, returnsNil, []string{key}, fence.Holder{Token: 6, Owner: "a"}, "set")
		require.NoError(t, err)
		require.Nil(t, got)
		require.Equal(t, "set", b.rdb.Get(ctx, key).Val())

		// The body sees the caller's keys and arguments only.
		got, err = b.w.Eval(ctx, echo, []string{key, key + ":other"}, fence.Holder{Token: 6, Owner: "a"}, "x", "y")
		require.NoError(t, err)
		require.Equal(t, []any{[]any{key, key + ":other"}, []any{"x", "y"}}, got)
		got, err = b.w.Eval(ctx, echo, []string{key}, fence.Holder{Token: 6, Owner: "a"})
		require.NoError(t, err)
		require.Equal(t, []any{[]any{key}, []any{}}, got)

		_, err = b.w.Eval(ctx, fails, []string{key}, fence.Holder{Token: 7, Owner: "a"})
		require.ErrorContains(t, err, "NOPE body refused")
		require.NotErrorIs(t, err, fence.ErrStaleToken)
	})
}

func TestCurrentOfUnknownKeyIsNone(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		tok, owner, err := b.w.Current(t.Context(), b.prefix+"never", "")
		require.NoError(t, err)
		require.Equal(t, fence.None, tok)
		require.Empty(t, owner)
	})
}

func TestCanceledContextIsJoined(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		err := b.w.Set(ctx, b.prefix+"k", "v", fence.Holder{Token: 1, Owner: "a"}, 0)
		require.ErrorIs(t, err, context.Canceled)
		require.NotErrorIs(t, err, fence.ErrStaleToken)
	})
}

// untouchable is a redis.UniversalClient that fails the test when used:
// bad input must be refused before Redis is contacted.
type untouchable struct {
	redis.UniversalClient
	t *testing.T
}

func (u untouchable) Process(_ context.Context, cmd redis.Cmder) error {
	u.t.Errorf("%v sent", cmd.Args())
	return nil
}

func TestBadInputNeverReachesRedis(t *testing.T) {
	t.Parallel()
	w := newWriter(t, untouchable{t: t})
	ctx := t.Context()
	script := redisfence.NewScript("return 1")
	var nilCtx context.Context // misuse: an error, never a panic
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"SetTokenZero", w.Set(ctx, "k", "v", fence.Holder{Token: 0, Owner: "a"}, 0), fence.ErrNoToken},
		{"SetEmptyKey", w.Set(ctx, "", "v", fence.Holder{Token: 1, Owner: "a"}, 0), redisfence.ErrInvalidKey},
		{"SetEmptyOwner", w.Set(ctx, "k", "v", fence.Holder{Token: 1, Owner: ""}, 0), redisfence.ErrInvalidOwner},
		{"SetNegativeTTL", w.Set(ctx, "k", "v", fence.Holder{Token: 1, Owner: "a"}, -2*time.Second), redisfence.ErrInvalidTTL},
		{"HSetNoFields", w.HSet(ctx, "k", nil, fence.Holder{Token: 1, Owner: "a"}), redisfence.ErrNoFields},
		{"HSetTokenZero", w.HSet(ctx, "k", map[string]string{"f": "v"}, fence.Holder{Token: 0, Owner: "a"}), fence.ErrNoToken},
		{"EvalNoKeys", evalErr(w.Eval(ctx, script, nil, fence.Holder{Token: 1, Owner: "a"})), redisfence.ErrInvalidKey},
		{"EvalTokenZero", evalErr(w.Eval(ctx, script, []string{"k"}, fence.Holder{Token: 0, Owner: "a"})), fence.ErrNoToken},
		{"CurrentEmptyKey", currentErr(w.Current(ctx, "", "")), redisfence.ErrInvalidKey},
		{"NilWriter", (*redisfence.Writer)(nil).Set(ctx, "k", "v", fence.Holder{Token: 1, Owner: "a"}, 0), redisfence.ErrNotCreated},
		{"SetNilContext", w.Set(nilCtx, "k", "v", fence.Holder{Token: 1, Owner: "a"}, 0), redisfence.ErrNilContext},
		{"HSetNilContext", w.HSet(nilCtx, "k", map[string]string{"f": "v"}, fence.Holder{Token: 1, Owner: "a"}), redisfence.ErrNilContext},
		{"EvalNilContext", evalErr(w.Eval(nilCtx, script, []string{"k"}, fence.Holder{Token: 1, Owner: "a"})), redisfence.ErrNilContext},
		{"CurrentNilContext", currentErr(w.Current(nilCtx, "k", "")), redisfence.ErrNilContext},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.ErrorIs(t, tt.err, tt.want)
			require.NotErrorIs(t, tt.err, fence.ErrStaleToken)
		})
	}
	_, err := w.Eval(ctx, nil, []string{"k"}, fence.Holder{Token: 1, Owner: "a"})
	require.ErrorContains(t, err, "nil script")
}

func evalErr(_ any, err error) error { return err }

func currentErr(_ fence.Token, _ string, err error) error { return err }

func TestClusterKeysNeedHashTag(t *testing.T) {
	t.Parallel()
	// The check happens before any connection: the address is never dialed.
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})
	t.Cleanup(func() { _ = cluster.Close() })
	w := newWriter(t, cluster)

	err := w.Set(t.Context(), "settlement:2026-03-08", "v", fence.Holder{Token: 1, Owner: "a"}, 0)
	require.ErrorIs(t, err, redisfence.ErrInvalidKey)
	require.ErrorContains(t, err, "hash tag")
	for _, key := range []string{"{}", "x{}y", "x}y{"} {
		require.ErrorIs(t, w.Set(t.Context(), key, "v", fence.Holder{Token: 1, Owner: "a"}, 0), redisfence.ErrInvalidKey, key)
	}
}

func TestHashTagKeysShareSlot(t *testing.T) {
	t.Parallel()
	// What the Cluster check relies on: a tagged key and its fence key hash
	// to one slot, by the Cluster spec's key hashing (keySlot below).
	for _, key := range []string{"settlement:{2026-03-08}", "{a}", "x{y}z{w}", "{a}}", "{{a}"} {
		require.Equal(t, keySlot(key), keySlot(redisfence.FenceKey(key)), key)
	}
	require.NotEqual(t, keySlot("settlement"), keySlot(redisfence.FenceKey("settlement")), "why a tag is needed")
	require.Equal(t, uint16(12739), keySlot("123456789"), "spec check value 0x31C3 mod 16384")
}

// keySlot is HASH_SLOT from the Redis Cluster specification: CRC16-XMODEM
// of the hash tag (or the whole key) mod 16384.
func keySlot(key string) uint16 {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			key = key[open+1 : open+1+end]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc % 16384
}

func TestStaleErrorUnwrapsForCallers(t *testing.T) {
	t.Parallel()
	rdb := redistest.Mini(t)
	w := newWriter(t, rdb)
	ctx := t.Context()
	require.NoError(t, w.Set(ctx, "k", "v", fence.Holder{Token: 2, Owner: "a"}, 0))
	err := w.Set(ctx, "k", "v", fence.Holder{Token: 1, Owner: "b"}, 0)
	wrapped := errors.Join(errors.New("job step"), err)
	require.ErrorIs(t, wrapped, fence.ErrStaleToken)
}

// newWriter is redisfence.New that fails the test on an error.
func newWriter(t *testing.T, rdb redis.UniversalClient) *redisfence.Writer {
	t.Helper()
	w, err := redisfence.New(rdb)
	require.NoError(t, err)
	return w
}

func TestNewRefusesANilClient(t *testing.T) {
	t.Parallel()
	for _, rdb := range []redis.UniversalClient{nil, (*redis.Client)(nil)} {
		_, err := redisfence.New(rdb)
		require.ErrorIs(t, err, redisfence.ErrInvalidClient)
	}
}

// TestRedisCommandsNeverShowTheOwner: the text of every command a Writer
// sends, as redisotel's tracing hook records it (db.statement) and as a
// logging hook prints it, never holds the holder's owner (a write
// capability: with the token it passes this very sink): Set, HSet, Eval,
// and a stale write refused. The owner still reaches the fence.
func TestRedisCommandsNeverShowTheOwner(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		seen := redistest.RecordStatements(b.rdb)
		h := fence.Holder{Token: 10, Owner: "c4cf6eb9f6f86911b62410cefdeb973e"}
		stale := fence.Holder{Token: 9, Owner: "0f2b2d0e4c3a40c1a5e8f1d2c3b4a596"}
		key := b.prefix + "settlement"
		require.NoError(t, b.w.Set(ctx, key, "v10", h, 0))
		require.NoError(t, b.w.HSet(ctx, b.prefix+"totals", map[string]string{"eur": "10"}, h))
		_, err := b.w.Eval(ctx, redisfence.NewScript(`return redis.call('SET', KEYS[1], ARGV[1])`), []string{b.prefix + "note"}, h, "paid")
		require.NoError(t, err)
		requireStale(t, b.w.Set(ctx, key, "v9", stale, 0), key, 9, 10)
		tok, owner, err := b.w.Current(ctx, key, "")
		require.NoError(t, err)
		require.Equal(t, h.Token, tok)
		require.Equal(t, h.Owner, owner, "the owner reached the fence")

		require.Empty(t, seen.Showing(h.Owner, stale.Owner), "a command shows an owner")
		require.Contains(t, seen.String(), "[owner]")
	})
}
