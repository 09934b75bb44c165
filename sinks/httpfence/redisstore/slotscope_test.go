package redisstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore"
	"github.com/holdfast-go/holdfast/sinks/httpfence/redisstore"
	"github.com/holdfast-go/holdfast/sinks/sinktest"
)

// bundle is one test's Fence, its client and its key prefix.
type bundle struct {
	rdb    redis.UniversalClient
	prefix string
	f      *redisstore.Fence
}

func newBundle(t *testing.T, rdb redis.UniversalClient) *bundle {
	t.Helper()
	prefix := redistest.Prefix(t, rdb)
	f, err := redisstore.NewFence(rdb, redisstore.Options{Prefix: prefix})
	require.NoError(t, err)
	return &bundle{rdb: rdb, prefix: prefix, f: f}
}

// unitKey is the documented name of the unit hash of (resource, unit),
// written out here so that a change of layout fails the tests.
func unitKey(prefix, resource, unit string) string {
	sum := sha256.Sum256([]byte("@" + strconv.Itoa(len(unit)) + ":" + unit + ":" + resource))
	return prefix + "{" + hex.EncodeToString(sum[:]) + "}"
}

// pairKey is the documented name of the hash of a (resource, scope) pair.
func pairKey(prefix, resource, scope string) string {
	sum := sha256.Sum256([]byte(strconv.Itoa(len(scope)) + ":" + scope + ":" + resource))
	return prefix + "{" + hex.EncodeToString(sum[:]) + "}"
}

// TestFenceConformance runs the sink contract on the Fence, SlotScopesClose
// included (sinktest.FenceSink makes a SlotScopeSink of a
// fence.SlotScopePruner), on a real Redis and on miniredis.
func TestFenceConformance(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			sinktest.Exercise(t, func(t *testing.T) sinktest.Sink {
				s := sinktest.FenceSink(newBundle(t, b.New(t)).f)
				_, ok := s.(sinktest.SlotScopeSink)
				require.True(t, ok, "the Fence's sink is a SlotScopeSink: SlotScopesClose runs")
				return s
			})
		})
	}
}

// naivePrune is the negative control's Fence: its PruneSlotScopes deletes
// the token:<slot> and owner:<slot> fields of the slots below before, as
// PruneSlotScopes does, but leaves closed where it was.
type naivePrune struct {
	*redisstore.Fence
	rdb    redis.UniversalClient
	prefix string
}

func (n naivePrune) PruneSlotScopes(ctx context.Context, resource, unit string, before time.Time) (int, error) {
	key := unitKey(n.prefix, resource, unit)
	fields, err := n.rdb.HKeys(ctx, key).Result()
	if err != nil {
		return 0, err
	}
	var gone []string
	count := 0
	for _, f := range fields {
		kind, slot, ok := strings.Cut(f, ":")
		if at, err := strconv.ParseInt(slot, 10, 64); ok && err == nil && (kind == "token" || kind == "owner") && at < before.Unix() {
			gone = append(gone, f)
			if kind == "token" {
				count++
			}
		}
	}
	if len(gone) > 0 {
		if err := n.rdb.HDel(ctx, key, gone...).Err(); err != nil {
			return 0, err
		}
	}
	return count, nil
}

// The negative control: a prune that deletes a slot's fence without
// raising closed lets the stale holder back in, and
// sinktest.CheckSlotScopesClose reports it; PruneSlotScopes itself passes
// the same check on the same Redis.
func TestSlotScopesCloseNegativeControl(t *testing.T) {
	t.Parallel()
	rdb := redistest.Real(t)
	b := newBundle(t, rdb)
	naive := sinktest.FenceSink(naivePrune{Fence: b.f, rdb: rdb, prefix: b.prefix}).(sinktest.SlotScopeSink)
	err := sinktest.CheckSlotScopesClose(t.Context(), naive, "naive")
	require.Error(t, err, "a prune that does not close the slots")
	require.ErrorContains(t, err, "ACCEPTED")
	t.Logf("the naive prune: %v", err)

	real := sinktest.FenceSink(newBundle(t, rdb).f).(sinktest.SlotScopeSink)
	require.NoError(t, sinktest.CheckSlotScopesClose(t.Context(), real, "real"))
}

// The layout: a slot scope's fence is two fields of its unit's hash, the
// watermark a third; other scopes, and scopes that only look like slot
// scopes, keep a hash per (resource, scope).
func TestSlotScopeLayout(t *testing.T) {
	t.Parallel()
	for _, be := range redistest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			b := newBundle(t, be.New(t))
			ctx := t.Context()
			const res, unit = "/pay", "settle|eu"
			require.NoError(t, b.f.Accept(ctx, res, fence.Holder{Scope: unit + "@1772928000", Token: 7, Owner: "a"}))
			require.NoError(t, b.f.Accept(ctx, res, fence.Holder{Scope: unit + "@-3600", Token: 8, Owner: "b"}))
			require.NoError(t, b.f.Accept(ctx, res, fence.Holder{Scope: unit, Token: 9, Owner: "c"}))
			require.NoError(t, b.f.Accept(ctx, res, fence.Holder{Scope: unit + "@01772928000", Token: 9, Owner: "c"}))

			require.Equal(t, map[string]string{
				"resource": res, "unit": unit,
				"token:1772928000": "7", "owner:1772928000": "a",
				"token:-3600": "8", "owner:-3600": "b",
			}, b.rdb.HGetAll(ctx, unitKey(b.prefix, res, unit)).Val())
			for _, scope := range []string{unit, unit + "@01772928000"} {
				require.Equal(t, map[string]string{"resource": res, "scope": scope, "token": "9", "owner": "c"},
					b.rdb.HGetAll(ctx, pairKey(b.prefix, res, scope)).Val(), scope)
			}

			n, err := b.f.PruneSlotScopes(ctx, res, unit, time.Unix(0, 0))
			require.NoError(t, err)
			require.Equal(t, 1, n, "slot -3600")
			require.Equal(t, map[string]string{
				"resource": res, "unit": unit, "closed": "0",
				"token:1772928000": "7", "owner:1772928000": "a",
			}, b.rdb.HGetAll(ctx, unitKey(b.prefix, res, unit)).Val())

			// A prune of a unit never written closes it all the same.
			n, err = b.f.PruneSlotScopes(ctx, res, "other", time.Unix(100, 0))
			require.NoError(t, err)
			require.Zero(t, n)
			err = b.f.Accept(ctx, res, fence.Holder{Scope: "other@99", Token: 1, Owner: "x"})
			require.ErrorIs(t, err, fence.ErrScopeClosed)
			require.NoError(t, b.f.Accept(ctx, res, fence.Holder{Scope: "other@100", Token: 1, Owner: "x"}))
			// fence.None is refused as no token, not as a closed scope.
			require.ErrorIs(t, b.f.Accept(ctx, res, fence.Holder{Scope: "other@99", Owner: "x"}), fence.ErrNoToken)
		})
	}
}

// countingClient is a client of a fresh miniredis that counts the
// commands it is asked to send.
func countingClient(t *testing.T) (redis.UniversalClient, *atomic.Int64) {
	rdb := redistest.Mini(t)
	var n atomic.Int64
	rdb.AddHook(counter{&n})
	return rdb, &n
}

type counter struct{ n *atomic.Int64 }

func (c counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

// PruneSlotScopes refuses a bad call before Redis is contacted.
func TestPruneSlotScopesValidatesFirst(t *testing.T) {
	t.Parallel()
	rdb, sent := countingClient(t)
	f, err := redisstore.NewFence(rdb, redisstore.Options{})
	require.NoError(t, err)
	ctx, cutoff := t.Context(), time.Now().Add(-2*fence.PruneMargin) // one Redis takes
	for _, c := range []struct{ name, resource, unit string }{
		{"EmptyResource", "", "u"},
		{"OversizedResource", strings.Repeat("r", 1<<20+1), "u"},
		{"EmptyUnit", "/pay", ""},
		{"OversizedUnit", "/pay", strings.Repeat("u", 1<<20+1)},
	} {
		_, err := f.PruneSlotScopes(ctx, c.resource, c.unit, cutoff)
		require.ErrorIs(t, err, httpfence.ErrInvalidOptions, c.name)
	}
	var nilCtx context.Context
	_, err = f.PruneSlotScopes(nilCtx, "/pay", "u", cutoff)
	require.ErrorIs(t, err, idemstore.ErrNilContext)
	var zero *redisstore.Fence
	_, err = zero.PruneSlotScopes(ctx, "/pay", "u", cutoff)
	require.ErrorIs(t, err, httpfence.ErrInvalidOptions)
	_, err = (&redisstore.Fence{}).PruneSlotScopes(ctx, "/pay", "u", cutoff)
	require.ErrorIs(t, err, httpfence.ErrInvalidOptions)
	require.Zero(t, sent.Load(), "no command sent")

	_, err = f.PruneSlotScopes(ctx, strings.Repeat("r", 1<<20), strings.Repeat("u", httpfence.MaxScopeLen-2), cutoff)
	require.NoError(t, err, "the longest resource and unit")
	require.NotZero(t, sent.Load())
}

// The stored format is checked before the first prune as before the first
// Accept: a prefix marked by another store is refused, nothing written;
// a fresh prefix gets the Fence's marker.
func TestPruneSlotScopesChecksTheFormat(t *testing.T) {
	t.Parallel()
	rdb := redistest.Mini(t)
	ctx := t.Context()
	require.NoError(t, rdb.Set(ctx, "other:format", "holdfast sinks/httpfence/redisstore.Store format 1", 0).Err())
	f, err := redisstore.NewFence(rdb, redisstore.Options{Prefix: "other:"})
	require.NoError(t, err)
	cutoff := time.Now().Add(-2 * fence.PruneMargin) // one Redis takes
	_, err = f.PruneSlotScopes(ctx, "/pay", "settle", cutoff)
	require.ErrorIs(t, err, fence.ErrUnknownFormat)
	require.Zero(t, rdb.Exists(ctx, unitKey("other:", "/pay", "settle")).Val(), "nothing written")

	f, err = redisstore.NewFence(rdb, redisstore.Options{Prefix: "mine:"})
	require.NoError(t, err)
	_, err = f.PruneSlotScopes(ctx, "/pay", "settle", cutoff)
	require.NoError(t, err)
	require.Equal(t, "holdfast sinks/httpfence/redisstore.Fence format 1", rdb.Get(ctx, "mine:format").Val())
}

// The growth the pruning bounds: 200 slots of one (resource, unit) are one
// key of 2 fields per slot; pruning all but the last 10 leaves the key
// with 3 + 2*10 fields. MEMORY USAGE is logged before and after, beside a
// fresh hash of 10 slots and the hash a pair scope takes, on the shared
// Redis and on one with hash-max-listpack-entries 128 (redis.conf's
// default; 200 slots make a hashtable there).
func TestSlotScopesGrowthIsBounded(t *testing.T) {
	t.Parallel()
	for _, be := range []redistest.Backend{
		{Name: "shared", New: redistest.Real},
		{Name: "listpack-entries-128", New: func(t testing.TB) redis.UniversalClient {
			return redisproc.Start(t, "--hash-max-listpack-entries", "128").Client(t)
		}},
	} {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			slotScopesGrowth(t, be.New(t))
		})
	}
}

func slotScopesGrowth(t *testing.T, rdb redis.UniversalClient) {
	b := newBundle(t, rdb)
	ctx := t.Context()
	const res, unit, slots, keep = "/settle", "settle|eu", 200, 10
	base := time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC)
	slot := func(i int) time.Time { return base.Add(time.Duration(i) * time.Hour) }
	for i := range slots {
		h := fence.Holder{Scope: fmt.Sprintf("%s@%d", unit, slot(i).Unix()), Token: fence.Token(1000 + i), Owner: "replica-1"}
		require.NoError(t, b.f.Accept(ctx, res, h))
	}
	key := unitKey(b.prefix, res, unit)
	keys := func() []string {
		var out []string
		iter := rdb.Scan(ctx, 0, b.prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			out = append(out, iter.Val())
		}
		require.NoError(t, iter.Err())
		return out
	}
	require.ElementsMatch(t, []string{b.prefix + "format", key}, keys(), "one key for every slot, beside the format marker")
	require.EqualValues(t, 2+2*slots, rdb.HLen(ctx, key).Val(), "resource, unit, and a token and an owner per slot")
	usage := func(k string) (int64, string) {
		n, err := rdb.MemoryUsage(ctx, k, 0).Result()
		require.NoError(t, err)
		return n, rdb.ObjectEncoding(ctx, k).Val()
	}
	before, beforeEnc := usage(key)

	n, err := b.f.PruneSlotScopes(ctx, res, unit, slot(slots-keep))
	require.NoError(t, err)
	require.Equal(t, slots-keep, n)
	require.ElementsMatch(t, []string{b.prefix + "format", key}, keys())
	require.EqualValues(t, 3+2*keep, rdb.HLen(ctx, key).Val(), "resource, unit, closed, and the last 10 slots")
	after, afterEnc := usage(key)
	require.Less(t, after, before)

	fresh := newBundle(t, rdb)
	for i := slots - keep; i < slots; i++ {
		h := fence.Holder{Scope: fmt.Sprintf("%s@%d", unit, slot(i).Unix()), Token: fence.Token(1000 + i), Owner: "replica-1"}
		require.NoError(t, fresh.f.Accept(ctx, res, h))
	}
	_, err = fresh.f.PruneSlotScopes(ctx, res, unit, slot(slots-keep))
	require.NoError(t, err)
	compact, compactEnc := usage(unitKey(fresh.prefix, res, unit))
	require.NoError(t, fresh.f.Accept(ctx, res, fence.Holder{Scope: unit, Token: 1000, Owner: "replica-1"}))
	pair, _ := usage(pairKey(fresh.prefix, res, unit))

	t.Logf("MEMORY USAGE of the unit hash: %d slots %d bytes (%s, %d per slot); pruned to %d slots %d bytes (%s; %d per slot pruned); "+
		"a fresh hash of %d slots %d bytes (%s); a pair scope's hash (a key per slot scope before) %d bytes",
		slots, before, beforeEnc, before/slots, keep, after, afterEnc, (before-after)/(slots-keep), keep, compact, compactEnc, pair)
}

// Accepts of a unit's slots racing prunes of it: no Accept fails but as
// stale or closed, and once done no slot below the last watermark holds a
// fence (no Accept wrote one behind a prune), every slot at or after it
// does, and a slot below it is refused as closed.
func TestSlotScopesAcceptRacingPrune(t *testing.T) {
	t.Parallel()
	rdb := redistest.Real(t)
	b := newBundle(t, rdb)
	ctx := t.Context()
	const res, unit, slots, watermark = "/race", "race", 400, 200
	var wg sync.WaitGroup
	errs := make(chan error, 4*slots+watermark)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range slots {
				err := b.f.Accept(ctx, res, fence.Holder{Scope: fmt.Sprintf("%s@%d", unit, i), Token: fence.Token(w + 1), Owner: strconv.Itoa(w)})
				if err != nil && !errors.Is(err, fence.ErrStaleToken) {
					errs <- err
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i <= watermark; i += 10 {
			if _, err := b.f.PruneSlotScopes(ctx, res, unit, time.Unix(int64(i), 0)); err != nil {
				errs <- err
			}
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	left := rdb.HGetAll(ctx, unitKey(b.prefix, res, unit)).Val()
	require.Equal(t, strconv.Itoa(watermark), left["closed"])
	for i := range slots {
		_, ok := left["token:"+strconv.Itoa(i)]
		require.Equal(t, i >= watermark, ok, "slot %d", i)
	}
	require.ErrorIs(t, b.f.Accept(ctx, res, fence.Holder{Scope: unit + "@199", Token: 99, Owner: "late"}), fence.ErrScopeClosed)
}

// On Redis Cluster, Accept and PruneSlotScopes of slot scopes work on one
// key each: the contract holds there too.
func TestSlotScopesCloseOnCluster(t *testing.T) {
	t.Parallel()
	rdb := redisproc.StartCluster(t, 3).Client(t)
	b := newBundle(t, rdb)
	s := sinktest.FenceSink(b.f).(sinktest.SlotScopeSink)
	require.NoError(t, sinktest.CheckSlotScopesClose(t.Context(), s, "cluster"))
}

// TestRedisCommandsNeverShowTheOwner: the text of every command the Fence
// sends, as redisotel's tracing hook records it (db.statement) and as a
// logging hook prints it, never holds a holder's owner (a write
// capability), for a plain scope and a slot scope, accepted and stale. The
// owners still reach the fences.
func TestRedisCommandsNeverShowTheOwner(t *testing.T) {
	t.Parallel()
	for _, be := range redistest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			b := newBundle(t, be.New(t))
			seen := redistest.RecordStatements(b.rdb)
			ctx := t.Context()
			const res, unit = "/pay", "settle|eu"
			plain := fence.Holder{Scope: unit, Token: 9, Owner: "c4cf6eb9f6f86911b62410cefdeb973e"}
			slot := fence.Holder{Scope: unit + "@1772928000", Token: 7, Owner: "0f2b2d0e4c3a40c1a5e8f1d2c3b4a596"}
			require.NoError(t, b.f.Accept(ctx, res, plain))
			require.NoError(t, b.f.Accept(ctx, res, slot))
			stale := fence.Holder{Scope: unit, Token: 8, Owner: "9d8c7b6a5f4e3d2c1b0a998877665544"}
			require.ErrorIs(t, b.f.Accept(ctx, res, stale), fence.ErrStaleToken)
			require.Equal(t, slot.Owner, b.rdb.HGet(ctx, unitKey(b.prefix, res, unit), "owner:1772928000").Val())
			require.Equal(t, plain.Owner, b.rdb.HGet(ctx, pairKey(b.prefix, res, unit), "owner").Val())

			require.Empty(t, seen.Showing(plain.Owner, slot.Owner, stale.Owner), "a command shows an owner")
			require.Contains(t, seen.String(), "[owner]")
		})
	}
}

// A cutoff later than Redis's clock minus fence.PruneMargin is refused
// with a *fence.PruneCutoffError and changes nothing: the unit hash is as
// it was (no watermark, every fence), and the slot just below the refused
// cutoff takes its holder's Accept. An older cutoff prunes as before.
func TestPruneSlotScopesRefusesACutoffOfSlotsThatMayStillRun(t *testing.T) {
	t.Parallel()
	for _, be := range redistest.Backends() {
		t.Run(be.Name, func(t *testing.T) {
			t.Parallel()
			rdb := be.New(t)
			b := newBundle(t, rdb)
			ctx := t.Context()
			const res, unit = "/settle", "settle|eu"
			now := time.Now()
			old := fence.Holder{Scope: fmt.Sprintf("%s@%d", unit, now.Add(-3*fence.PruneMargin).Unix()), Token: 5, Owner: "a"}
			recent := fence.Holder{Scope: fmt.Sprintf("%s@%d", unit, now.Add(-time.Second).Unix()), Token: 7, Owner: "b"}
			require.NoError(t, b.f.Accept(ctx, res, old))
			require.NoError(t, b.f.Accept(ctx, res, recent))
			key := unitKey(b.prefix, res, unit)
			fields := rdb.HGetAll(ctx, key).Val()

			for _, cutoff := range []time.Time{now.Add(time.Hour), now, now.Add(-fence.PruneMargin + time.Minute)} {
				n, err := b.f.PruneSlotScopes(ctx, res, unit, cutoff)
				sinktest.RequirePruneCutoffRefused(t, err, n, res, cutoff, now, "Redis's clock")
				require.Equal(t, fields, rdb.HGetAll(ctx, key).Val(), "nothing changed")
			}
			require.NoError(t, b.f.Accept(ctx, res, recent), "the slot below the refused cutoff is open")
			err := b.f.Accept(ctx, res, fence.Holder{Scope: recent.Scope, Token: 6, Owner: "c"})
			require.ErrorIs(t, err, fence.ErrStaleToken)
			require.NotErrorIs(t, err, fence.ErrScopeClosed)
			require.NoError(t, b.f.Accept(ctx, res, old))

			cutoff := now.Add(-fence.PruneMargin - time.Minute)
			n, err := b.f.PruneSlotScopes(ctx, res, unit, cutoff)
			require.NoError(t, err, "a cutoff older than the limit")
			require.Equal(t, 1, n, "the old slot's fence")
			require.Equal(t, strconv.FormatInt(cutoff.Unix(), 10), rdb.HGet(ctx, key, "closed").Val())
			require.ErrorIs(t, b.f.Accept(ctx, res, old), fence.ErrScopeClosed)
			require.NoError(t, b.f.Accept(ctx, res, recent))
		})
	}
}

// Redis's clock decides, not the caller's: on a miniredis whose clock is
// two days behind, a cutoff two hours behind the caller's clock is
// refused, naming the server's clock; two days ahead, a cutoff of the
// caller's now is taken.
func TestPruneSlotScopesCutoffIsCheckedOnRedisClock(t *testing.T) {
	t.Parallel()
	mr, rdb := redistest.MiniServer(t)
	b := newBundle(t, rdb)
	ctx := t.Context()
	now := time.Now()
	key := unitKey(b.prefix, "/settle", "u")

	behind := now.Add(-48 * time.Hour).Truncate(time.Microsecond)
	mr.SetTime(behind)
	cutoff := now.Add(-2 * fence.PruneMargin)
	_, err := b.f.PruneSlotScopes(ctx, "/settle", "u", cutoff)
	var ce *fence.PruneCutoffError
	require.ErrorAs(t, err, &ce)
	require.Equal(t, fence.PruneCutoffError{Before: cutoff, Limit: behind.UTC().Add(-fence.PruneMargin), Now: behind.UTC(), Margin: fence.PruneMargin}, *ce)
	require.Zero(t, rdb.Exists(ctx, key).Val(), "nothing written")

	mr.SetTime(now.Add(48 * time.Hour))
	_, err = b.f.PruneSlotScopes(ctx, "/settle", "u", now)
	require.NoError(t, err)
	require.Equal(t, strconv.FormatInt(now.Unix(), 10), rdb.HGet(ctx, key, "closed").Val())
}
