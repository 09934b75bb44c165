package compat_test

import (
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/redislease"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore"
	"github.com/holdfast-go/holdfast/sinks/httpfence/redisstore"
	"github.com/holdfast-go/holdfast/sinks/redisfence"
)

// update writes the fixtures anew from the current code: go test
// ./internal/compat -run Golden -update. Do it only for a change of
// layout that old builds read as they read the old one; otherwise raise
// the format version (docs/compatibility.md).
var update = flag.Bool("update", false, "write testdata/*_format1.json from the current code")

// The fixed workload of the golden fixtures.
var (
	goldenSlot  = ledger.Slot{Job: "settle", At: time.Date(2026, 12, 1, 2, 0, 0, 0, time.UTC), Partition: "eu"}
	goldenOwner = "owner-a"
)

// redisKey is one key of a dump: its type, whether it has a TTL, and its
// value (a string, a hash's fields, a zset's members and scores, a set's
// members).
type redisKey struct {
	Key    string             `json:"key"`
	Type   string             `json:"type"`
	TTL    bool               `json:"ttl,omitempty"`
	String string             `json:"string,omitempty"`
	Hash   map[string]string  `json:"hash,omitempty"`
	ZSet   map[string]float64 `json:"zset,omitempty"`
	Set    []string           `json:"set,omitempty"`
}

// redisWorkload writes, with the current code, one of everything the
// Redis stores keep, at their default prefixes: a lease taken and
// released and one still held, a ledger slot run to success and a paused
// job, a fenced write, a completed idempotency record and an accepted
// fence. It returns the token of the released lease.
func redisWorkload(t *testing.T, rdb redis.UniversalClient) fence.Token {
	ctx := t.Context()
	leases, err := redislease.NewBackend(rdb, redislease.Options{Holder: "replica-1"})
	require.NoError(t, err)
	l, err := redisledger.New(rdb, redisledger.Options{})
	require.NoError(t, err)
	w, err := redisfence.New(rdb)
	require.NoError(t, err)
	s, err := redisstore.NewStore(rdb, redisstore.Options{})
	require.NoError(t, err)
	hf, err := redisstore.NewFence(rdb, redisstore.Options{})
	require.NoError(t, err)
	tok := goldenWorkload(t, leases, l, s, func(h fence.Holder) {
		require.NoError(t, w.Set(ctx, "orders:{eu}:1", "settled", h, 0))
		require.NoError(t, hf.Accept(ctx, "orders", h))
	})
	// httpfence's Redis fence under two slot scopes of goldenSlot's unit
	// (OverlapAllow), the first pruned: the unit's hash holds the second
	// slot's fence and the watermark (closed).
	for _, h := range goldenHTTPSlots {
		require.NoError(t, hf.Accept(ctx, "orders", h))
	}
	pruned, err := hf.PruneSlotScopes(ctx, "orders", ledger.UnitScope(goldenSlot.Job, goldenSlot.Partition), goldenHTTPCut)
	require.NoError(t, err)
	require.Equal(t, 1, pruned)
	// redisfence under two slot scopes of goldenSlot's unit, the first
	// pruned: orders:{eu}:1's fence hash holds the second slot's fence and
	// the unit's watermark (closed:<unit>).
	for _, h := range goldenRedisfenceSlots {
		require.NoError(t, w.Set(ctx, "orders:{eu}:1", "settled", h, 0))
	}
	n, err := w.PruneSlotScopes(ctx, "orders:{eu}:1", ledger.UnitScope(goldenSlot.Job, goldenSlot.Partition), goldenSlot.At.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	// A slot claimed and still running: the unit's hot run (redisledger's
	// scripts/fence.lua), under a lease still held.
	res, err := l.ClaimAll(ctx, leases, []ledger.ClaimRequest{{
		Lease: leasedriver.AcquireRequest{Name: ledger.UnitScope(goldenHot.Job, goldenHot.Partition), Owner: goldenOwner, TTL: time.Hour},
		Begin: &ledger.BeginRequest{Slot: goldenHot, Fence: ledger.Fence{Holder: "replica-1"}, MaxAttempts: 3,
			Prev: goldenHot.At.Add(-time.Hour), Since: goldenHot.At.Add(-time.Hour)},
	}}, 0, goldenHot.At.Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, 1, res[0].Begin.Attempt)
	return tok
}

// goldenHTTPSlots hold two slot scopes of goldenSlot's unit at httpfence's
// Redis fence; the first is pruned (before goldenHTTPCut).
var (
	goldenHTTPSlots = []fence.Holder{
		{Scope: ledger.SlotScope(goldenSlot), Token: 5, Owner: goldenOwner},
		{Scope: ledger.SlotScope(ledger.Slot{Job: goldenSlot.Job, At: goldenHTTPCut, Partition: goldenSlot.Partition}), Token: 6, Owner: goldenOwner},
	}
	goldenHTTPCut = goldenSlot.At.Add(time.Hour)
)

// goldenRedisfenceSlots hold two slot scopes of goldenSlot's unit, an
// hour apart, at redisfence's fence of orders:{eu}:1; the first is pruned.
var goldenRedisfenceSlots = []fence.Holder{
	{Scope: ledger.SlotScope(goldenSlot), Token: 7, Owner: goldenOwner},
	{Scope: ledger.SlotScope(ledger.Slot{Job: goldenSlot.Job, At: goldenSlot.At.Add(time.Hour), Partition: goldenSlot.Partition}), Token: 8, Owner: goldenOwner},
}

// goldenHot is the Redis fixture's running slot, claimed with ClaimAll.
var goldenHot = ledger.Slot{Job: "settle", At: time.Date(2026, 12, 1, 3, 0, 0, 0, time.UTC), Partition: "us"}

// goldenWorkload is the fixed workload of the fixtures on one medium's
// stores: a lease taken and released and one still held (labelled
// "replica-1"), a ledger slot run to success and a paused job, write's
// fenced writes with the released lease's holder, and a completed
// idempotency record. It returns the released lease's token.
func goldenWorkload(t *testing.T, leases leasedriver.Backend, l ledger.Ledger, idem idemstore.Store, write func(fence.Holder)) fence.Token {
	ctx := t.Context()
	scope := ledger.UnitScope(goldenSlot.Job, goldenSlot.Partition)
	g, err := leases.Acquire(ctx, scope, goldenOwner, time.Hour)
	require.NoError(t, err)
	require.True(t, g.Acquired)
	held, err := leases.Acquire(ctx, "held", goldenOwner, time.Hour)
	require.NoError(t, err)
	require.True(t, held.Acquired)

	f := ledger.Fence{Scope: scope, Token: g.Token, Owner: goldenOwner, Holder: "replica-1"}
	now := goldenSlot.At.Add(time.Second)
	attempt, _, err := l.Begin(ctx, goldenSlot, f, 3, now)
	require.NoError(t, err)
	require.NoError(t, l.Finish(ctx, goldenSlot, f, attempt, ledger.Outcome{Status: ledger.StatusSucceeded}, now.Add(time.Second)))
	require.NoError(t, l.SetPaused(ctx, "paused-job", true))

	write(fence.Holder{Scope: scope, Token: g.Token, Owner: goldenOwner})

	out, err := idem.Begin(ctx, "key-1", "fingerprint-1", time.Minute)
	require.NoError(t, err)
	require.NoError(t, idem.Complete(ctx, "key-1", out.Lock, &idemstore.Response{
		Status: http.StatusCreated, Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"ok":true}`),
	}, time.Hour))

	require.NoError(t, leases.Release(ctx, leasedriver.Held{Name: scope, Owner: goldenOwner, TTL: time.Hour, Handle: g.Handle}))
	return g.Token
}

// dumpRedis returns every key of rdb, sorted.
func dumpRedis(t *testing.T, rdb redis.UniversalClient) []redisKey {
	ctx := t.Context()
	keys, err := rdb.Keys(ctx, "*").Result()
	require.NoError(t, err)
	sort.Strings(keys)
	out := make([]redisKey, 0, len(keys))
	for _, k := range keys {
		typ, err := rdb.Type(ctx, k).Result()
		require.NoError(t, err)
		ttl, err := rdb.PTTL(ctx, k).Result()
		require.NoError(t, err)
		rk := redisKey{Key: k, Type: typ, TTL: ttl > 0}
		switch typ {
		case "string":
			rk.String = rdb.Get(ctx, k).Val()
		case "hash":
			rk.Hash = rdb.HGetAll(ctx, k).Val()
		case "zset":
			rk.ZSet = map[string]float64{}
			for _, z := range rdb.ZRangeWithScores(ctx, k, 0, -1).Val() {
				rk.ZSet[z.Member.(string)] = z.Score
			}
		case "set":
			rk.Set = rdb.SMembers(ctx, k).Val()
			sort.Strings(rk.Set)
		default:
			t.Fatalf("key %s of type %s: add it to the dump", k, typ)
		}
		out = append(out, rk)
	}
	return out
}

// restoreRedis writes a dump into rdb; keys that had a TTL get an hour.
func restoreRedis(t *testing.T, rdb redis.UniversalClient, dump []redisKey) {
	ctx := t.Context()
	for _, k := range dump {
		switch k.Type {
		case "string":
			require.NoError(t, rdb.Set(ctx, k.Key, k.String, 0).Err())
		case "hash":
			require.NoError(t, rdb.HSet(ctx, k.Key, k.Hash).Err())
		case "zset":
			for m, s := range k.ZSet {
				require.NoError(t, rdb.ZAdd(ctx, k.Key, redis.Z{Member: m, Score: s}).Err())
			}
		case "set":
			require.NoError(t, rdb.SAdd(ctx, k.Key, k.Set).Err())
		}
		if k.TTL {
			require.NoError(t, rdb.Expire(ctx, k.Key, time.Hour).Err())
		}
	}
}

// volatile matches what differs from one run of a workload to the next:
// tokens and times (10 or more digits, µs and ms since the epoch, maybe
// with a fraction), and random values (lock tokens, owners: 16 or more
// hex or base64url characters that are not a sha256 key).
var volatile = regexp.MustCompile(`[0-9]{10,}(\.[0-9]+)?|[A-Za-z0-9_-]{22,}`)

// shape is a dump with its volatile parts replaced: the stored layout
// (keys, types, fields, members and the fixed parts of values).
func shape(dump []redisKey) []string {
	norm := func(s string) string { return volatile.ReplaceAllString(s, "<v>") }
	var out []string
	for _, k := range dump {
		key := norm(k.Key)
		line := key + " " + k.Type
		if k.TTL {
			line += " ttl"
		}
		out = append(out, line)
		if k.String != "" {
			out = append(out, key+" = "+norm(k.String))
		}
		for f, v := range k.Hash {
			out = append(out, key+" "+norm(f)+" = "+norm(v))
		}
		for m := range k.ZSet {
			out = append(out, key+" member "+norm(m))
		}
		for _, m := range k.Set {
			out = append(out, key+" member "+norm(m))
		}
	}
	sort.Strings(out)
	return out
}

func readFixture(t *testing.T, name string, v any) {
	path := filepath.Join("testdata", name)
	if *update {
		b, err := json.MarshalIndent(v, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(path, append(b, '\n'), 0o644))
		return
	}
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, v))
}

// The Redis state of format 1: the current code writes the layout of the
// fixture (a change of layout fails here), and operates on the fixture's
// state as on its own.
func TestGoldenRedisFormat1(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	now := redisproc.Start(t).Client(t)
	redisWorkload(t, now)
	current := dumpRedis(t, now)
	var fixture []redisKey
	if *update {
		fixture = current
	}
	readFixture(t, "redis_format1.json", &fixture)
	require.Equal(t, shape(fixture), shape(current),
		"the stored layout changed: a change old builds cannot read raises the format version (docs/compatibility.md); "+
			"one they can is written to the fixture with -update")

	// Load the fixture into an empty Redis and work on it.
	rdb := redisproc.Start(t).Client(t)
	restoreRedis(t, rdb, fixture)
	scope := ledger.UnitScope(goldenSlot.Job, goldenSlot.Partition)
	var old fence.Token
	for _, k := range fixture {
		if k.Key == redislease.DefaultPrefix+"{"+scope+"}:fence" {
			tok, err := fence.ParseToken(k.String)
			require.NoError(t, err)
			old = tok
		}
	}
	require.NotZero(t, old, "the fixture holds the lease's fence counter")
	stale := fence.Holder{Scope: scope, Token: old, Owner: goldenOwner}

	// The lease: a new acquisition's token is above the fixture's; the
	// held lease is still held.
	leases, err := redislease.NewBackend(rdb, redislease.Options{})
	require.NoError(t, err)
	g, err := leases.Acquire(ctx, scope, "owner-b", time.Minute)
	require.NoError(t, err)
	require.True(t, g.Acquired)
	require.Greater(t, g.Token, old)
	held, err := leases.Acquire(ctx, "held", "owner-b", time.Minute)
	require.NoError(t, err)
	require.False(t, held.Acquired, "the fixture's held lease is held")
	info, err := leases.Inspect(ctx, "held")
	require.NoError(t, err)
	require.True(t, info.Held)
	require.Equal(t, "replica-1", info.Holder)
	fresh := fence.Holder{Scope: scope, Token: g.Token, Owner: "owner-b"}

	// The ledger: the slot reads back as it was recorded, the paused job
	// is paused, and the stale token cannot begin the slot again.
	l, err := redisledger.New(rdb, redisledger.Options{})
	require.NoError(t, err)
	rec, ok, err := l.Get(ctx, goldenSlot)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, ledger.StatusSucceeded, rec.Status)
	require.Equal(t, 1, rec.Attempt)
	hot, ok, err := l.Get(ctx, goldenHot)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, ledger.StatusRunning, hot.Status, "the fixture's running slot reads back running")
	hotScope := ledger.UnitScope(goldenHot.Job, goldenHot.Partition)
	hotFence := ledger.Fence{Scope: hotScope, Token: hot.Attempts[0].Token, Owner: goldenOwner}
	require.NoError(t, l.Heartbeat(ctx, goldenHot, hotFence, 1, goldenHot.At.Add(2*time.Second)))
	require.ErrorIs(t, l.Heartbeat(ctx, goldenHot, ledger.Fence{Scope: hotScope, Token: hotFence.Token - 1, Owner: "owner-z"}, 1, goldenHot.At),
		fence.ErrStaleToken)
	require.NoError(t, l.Finish(ctx, goldenHot, hotFence, 1, ledger.Outcome{Status: ledger.StatusSucceeded}, goldenHot.At.Add(3*time.Second)))
	hot, _, err = l.Get(ctx, goldenHot)
	require.NoError(t, err)
	require.Equal(t, ledger.StatusSucceeded, hot.Status)
	require.Equal(t, "replica-1", hot.Attempts[0].Holder)
	paused, err := l.Paused(ctx, "paused-job")
	require.NoError(t, err)
	require.True(t, paused)
	next := ledger.Slot{Job: goldenSlot.Job, At: goldenSlot.At.Add(time.Hour), Partition: goldenSlot.Partition}
	_, _, err = l.Begin(ctx, next, ledger.Fence{Scope: scope, Token: old - 1, Owner: "owner-z"}, 3, next.At)
	require.ErrorIs(t, err, fence.ErrStaleToken, "a token below the fixture's ledger fence")
	_, _, err = l.Begin(ctx, next, ledger.Fence{Scope: scope, Token: g.Token, Owner: "owner-b"}, 3, next.At)
	require.NoError(t, err)

	// The sinks: the fixture's fences refuse a token below theirs and take
	// a newer one; the idempotency record replays.
	w, err := redisfence.New(rdb)
	require.NoError(t, err)
	require.ErrorIs(t, w.Set(ctx, "orders:{eu}:1", "late", fence.Holder{Scope: scope, Token: old - 1, Owner: "owner-z"}, 0), fence.ErrStaleToken)
	require.NoError(t, w.Set(ctx, "orders:{eu}:1", "again", stale, 0), "the same holder again is accepted")
	require.NoError(t, w.Set(ctx, "orders:{eu}:1", "newer", fresh, 0))
	require.ErrorIs(t, w.Set(ctx, "orders:{eu}:1", "late", stale, 0), fence.ErrStaleToken)
	require.Equal(t, "newer", rdb.Get(ctx, "orders:{eu}:1").Val())
	// Its slot scopes: the fixture's pruned slot stays closed whatever the
	// token; the kept slot refuses a stale token and takes its holder.
	closedSlot, keptSlot := goldenRedisfenceSlots[0], goldenRedisfenceSlots[1]
	err = w.Set(ctx, "orders:{eu}:1", "late", fence.Holder{Scope: closedSlot.Scope, Token: fresh.Token, Owner: "owner-b"}, 0)
	var refusal *fence.StaleTokenError
	require.ErrorAs(t, err, &refusal)
	require.ErrorIs(t, err, fence.ErrScopeClosed)
	require.Equal(t, goldenSlot.At.Add(time.Hour), refusal.ClosedBefore, "the fixture's watermark")
	err = w.Set(ctx, "orders:{eu}:1", "late", fence.Holder{Scope: keptSlot.Scope, Token: keptSlot.Token - 1, Owner: "owner-z"}, 0)
	require.ErrorIs(t, err, fence.ErrStaleToken)
	require.NotErrorIs(t, err, fence.ErrScopeClosed)
	require.NoError(t, w.Set(ctx, "orders:{eu}:1", "newer", keptSlot, 0))
	require.Equal(t, "newer", rdb.Get(ctx, "orders:{eu}:1").Val())

	s, err := redisstore.NewStore(rdb, redisstore.Options{})
	require.NoError(t, err)
	out, err := s.Begin(ctx, "key-1", "fingerprint-1", time.Minute)
	require.NoError(t, err)
	require.Equal(t, idemstore.StateCompleted, out.State)
	require.Equal(t, http.StatusCreated, out.Response.Status)
	require.Equal(t, `{"ok":true}`, string(out.Response.Body))
	out, err = s.Begin(ctx, "key-1", "fingerprint-2", time.Minute)
	require.NoError(t, err)
	require.Equal(t, idemstore.StateMismatch, out.State)
	hf, err := redisstore.NewFence(rdb, redisstore.Options{})
	require.NoError(t, err)
	require.ErrorIs(t, hf.Accept(ctx, "orders", fence.Holder{Scope: scope, Token: old - 1, Owner: "owner-z"}), fence.ErrStaleToken)
	require.NoError(t, hf.Accept(ctx, "orders", fresh))
	require.ErrorIs(t, hf.Accept(ctx, "orders", stale), fence.ErrStaleToken)
	// Its slot scopes: the pruned slot stays closed, the kept one refuses a
	// stale token and takes its holder, and a later prune closes it too.
	require.ErrorIs(t, hf.Accept(ctx, "orders", goldenHTTPSlots[0]), fence.ErrScopeClosed)
	kept := goldenHTTPSlots[1]
	require.ErrorIs(t, hf.Accept(ctx, "orders", fence.Holder{Scope: kept.Scope, Token: kept.Token - 1, Owner: "owner-z"}), fence.ErrStaleToken)
	require.NoError(t, hf.Accept(ctx, "orders", kept))
	pruned, err := hf.PruneSlotScopes(ctx, "orders", ledger.UnitScope(goldenSlot.Job, goldenSlot.Partition), goldenHTTPCut.Add(time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, pruned, "the fixture's kept slot")
	require.ErrorIs(t, hf.Accept(ctx, "orders", kept), fence.ErrScopeClosed)
}
