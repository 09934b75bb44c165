package httpfence_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/httpfencetest"
	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore"
	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore/idemstoretest"
	"github.com/holdfast-go/holdfast/sinks/httpfence/pgstore"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// The Postgres store joins a Postgres fence on its own pool: Begin and the
// fence check are one statement (BeginFenced).

// statements counts the round trips a pool makes (n): a statement sent
// alone, or a batch (the stores pipeline a statement with its BEGIN and
// COMMIT where it cannot be sent alone; batches counts those).
type statements struct{ n, batches, raises atomic.Int64 }

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	s.n.Add(1)
	s.countRaise(d.SQL)
	return ctx
}

// countRaise counts the statements sent that would raise a guard: BeginFenced's
// whole statement (its raise CTE).
func (s *statements) countRaise(sql string) {
	if strings.Contains(sql, "raise AS (") {
		s.raises.Add(1)
	}
}

func (*statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	s.n.Add(1)
	s.batches.Add(1)
	return ctx
}

func (s *statements) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	s.countRaise(d.SQL)
}

func (*statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// joinedStores returns a Store and a Fence on one schema of a pool of the
// test's own whose statements are counted.
func joinedStores(t *testing.T) (*pgstore.Store, *pgstore.Fence, *statements, *pgxpool.Pool) {
	t.Helper()
	return joinedStoresAt(t, "")
}

// joinedStoresAt is joinedStores on a pool whose connections default to
// isolation (default_transaction_isolation; "" leaves the server's).
func joinedStoresAt(t *testing.T, isolation string) (*pgstore.Store, *pgstore.Fence, *statements, *pgxpool.Pool) {
	t.Helper()
	count := &statements{}
	pool := pgtest.OwnPool(t, func(cfg *pgxpool.Config) {
		cfg.ConnConfig.Tracer = count
		cfg.MaxConns = 4
		if isolation != "" {
			cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = isolation
		}
	})
	schema := newSchema(t)
	st, err := pgstore.NewStore(pool, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, st.Migrate(context.Background()))
	f, err := pgstore.NewFence(pool, pgfence.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, f.Migrate(context.Background()))
	return st, f, count, pool
}

func TestPostgresStoreJoinsAFenceOnItsPool(t *testing.T) {
	t.Parallel()
	st, f, _, _ := joinedStores(t)
	require.True(t, st.JoinsFence(f))
	other, err := pgstore.NewFence(testPool(t), pgfence.Options{Schema: "x"})
	require.NoError(t, err)
	require.False(t, st.JoinsFence(other), "a fence on another pool")
	require.False(t, st.JoinsFence(httpfencetest.NewMemoryFence()))
	_, err = st.BeginFenced(t.Context(), "k", fpA, long, other, "/r", fence.Holder{Token: 1, Owner: "a"})
	require.ErrorIs(t, err, httpfence.ErrInvalidOptions)
}

// A new key costs two statements: the joined claim and fence check, then
// Complete; a replay (with its fence raise) one, or two for a holder the
// guard is at already (the claim alone finds the key first).
func TestPostgresNewKeyIsTwoStatements(t *testing.T) {
	t.Parallel()
	pgtest.EachIsolation(t, func(t *testing.T, iso string) {
		st, f, count, pool := joinedStoresAt(t, iso)
		mw, err := httpfence.Middleware(httpfence.Options{Store: st, Fence: f, AllowUnauthenticatedFencing: true})
		require.NoError(t, err)
		h := mw(benchHandler)
		serve := func(key, token string) int {
			r := httptest.NewRequest(http.MethodPost, "/settle", strings.NewReader("{}"))
			r.Header.Set(httpfence.KeyHeader, key)
			r.Header.Set(httpfence.TokenHeader, token)
			r.Header.Set(httpfence.OwnerHeader, `"a"`)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			return rec.Code
		}
		// At READ COMMITTED (the server's default) the two statements of a
		// key go alone; at another default level each goes in a batch that
		// names READ COMMITTED, once the first statement sent alone found
		// the level (and wrote nothing: pgtx.AtReadCommitted).
		rc := iso == "read committed"
		// The fence is at the holder already, so the first statement sent
		// alone would claim the key at once if its claim were not gated too.
		require.NoError(t, f.Accept(t.Context(), "/settle", fence.Holder{Token: 1780000000000001, Owner: "a"}))
		// The first request checks the stored format of the store (one
		// SELECT), once.
		before, batches := count.n.Load(), count.batches.Load()
		require.Equal(t, http.StatusCreated, serve(`"k0"`, "1780000000000001"))
		require.EqualValues(t, map[bool]int{true: 3, false: 4}[rc], count.n.Load()-before, "statements for the first key")
		require.EqualValues(t, map[bool]int{true: 0, false: 2}[rc], count.batches.Load()-batches, "batches for the first key")
		before, batches = count.n.Load(), count.batches.Load()
		require.Equal(t, http.StatusCreated, serve(`"k1"`, "1780000000000001"))
		require.EqualValues(t, 2, count.n.Load()-before, "statements for a new key")
		require.EqualValues(t, map[bool]int{true: 0, false: 2}[rc], count.batches.Load()-batches, "batches for a new key")
		before = count.n.Load()
		require.Equal(t, http.StatusCreated, serve(`"k1"`, "1780000000000002"))
		require.EqualValues(t, 1, count.n.Load()-before, "statements for a replay")
		tok, _, err := f.Guard().Current(t.Context(), pool, "/settle", "")
		require.NoError(t, err)
		require.Equal(t, fence.Token(1780000000000002), tok, "the replay raised the fence")
		// The guard is at the holder now: at READ COMMITTED its replay is
		// the claim alone first (which finds the key), then the whole
		// statement; at another level the whole statement alone.
		before = count.n.Load()
		require.Equal(t, http.StatusCreated, serve(`"k0"`, "1780000000000002"))
		require.EqualValues(t, map[bool]int{true: 2, false: 1}[rc], count.n.Load()-before, "the first key was completed too: a replay")
	})
}

// Without a fence, a new key is two statements too (Begin's insert and
// Complete) and a replay two (the insert, which finds the key, and the
// read): each sent alone where the default level is READ COMMITTED, in a
// READ COMMITTED batch at another (after the first sent alone found the
// level and wrote nothing).
func TestPostgresStoreStatementsAtEveryIsolation(t *testing.T) {
	t.Parallel()
	pgtest.EachIsolation(t, func(t *testing.T, iso string) {
		st, _, count, _ := joinedStoresAt(t, iso)
		mw, err := httpfence.Middleware(httpfence.Options{Store: st})
		require.NoError(t, err)
		h := mw(benchHandler)
		serve := func(key string) (int, string) {
			r := httptest.NewRequest(http.MethodPost, "/settle", strings.NewReader("{}"))
			r.Header.Set(httpfence.KeyHeader, key)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			return rec.Code, rec.Body.String()
		}
		rc := iso == "read committed"
		before, batches := count.n.Load(), count.batches.Load()
		code, body := serve(`"k0"`)
		require.Equal(t, http.StatusCreated, code)
		// The store's format check (one SELECT) comes first, once.
		require.EqualValues(t, map[bool]int{true: 3, false: 4}[rc], count.n.Load()-before, "statements for the first key")
		require.EqualValues(t, map[bool]int{true: 0, false: 2}[rc], count.batches.Load()-batches, "batches for the first key")
		before, batches = count.n.Load(), count.batches.Load()
		code, _ = serve(`"k1"`)
		require.Equal(t, http.StatusCreated, code)
		require.EqualValues(t, 2, count.n.Load()-before, "statements for a new key")
		require.EqualValues(t, map[bool]int{true: 0, false: 2}[rc], count.batches.Load()-batches, "batches for a new key")
		before, batches = count.n.Load(), count.batches.Load()
		replayed, again := serve(`"k0"`)
		require.Equal(t, http.StatusCreated, replayed)
		require.Equal(t, body, again, "the stored response")
		require.EqualValues(t, 2, count.n.Load()-before, "statements for a replay")
		require.EqualValues(t, map[bool]int{true: 0, false: 2}[rc], count.batches.Load()-batches, "batches for a replay")
	})
}

// A holder's requests after its first are sent the claim alone, gated on
// the guard holding it (the guard was at its token when the store last
// looked). Where the guard moved on (its row pruned, or raised by a newer
// holder) that statement claims nothing and the whole one decides: the
// holder is admitted and the guard raised again, or refused.
func TestPostgresBeginFencedSkipsTheRaiseForAHeldGuard(t *testing.T) {
	t.Parallel()
	st, f, count, pool := joinedStores(t)
	ctx := t.Context()
	a := fence.Holder{Scope: "job", Token: 1780000000000001, Owner: "a"}
	begin := func(key string, h fence.Holder) (idemstore.Outcome, error) {
		return st.BeginFenced(ctx, key, fpA, long, f, "/r", h)
	}
	current := func() fence.Token {
		tok, _, err := f.Guard().Current(ctx, pool, "/r", "job")
		require.NoError(t, err)
		return tok
	}

	out, err := begin("k0", a)
	require.NoError(t, err)
	require.Equal(t, idemstore.StateNew, out.State)
	raises := count.raises.Load()
	out, err = begin("k1", a)
	require.NoError(t, err)
	require.Equal(t, idemstore.StateNew, out.State)
	require.Zero(t, count.raises.Load()-raises, "the guard held a: no raise sent")

	// The guard's row goes (as a prune would take it): the store's hint is
	// stale. a is admitted again, and the guard raised again.
	_, err = pool.Exec(ctx, `DELETE FROM `+f.Guard().Table().Sanitize()+` WHERE resource = '/r'`)
	require.NoError(t, err)
	before := count.n.Load()
	out, err = begin("k2", a)
	require.NoError(t, err)
	require.Equal(t, idemstore.StateNew, out.State, "admitted: the whole statement raised the guard")
	require.EqualValues(t, 2, count.n.Load()-before, "the claim alone, then the whole statement")
	require.Equal(t, a.Token, current())

	// A newer holder raises the guard through another store: a is stale.
	b := fence.Holder{Scope: "job", Token: a.Token + 1, Owner: "b"}
	require.NoError(t, f.Accept(ctx, "/r", b))
	_, err = begin("k3", a)
	var stale *fence.StaleTokenError
	require.ErrorAs(t, err, &stale)
	require.Equal(t, b.Token, stale.Current)
	require.Equal(t, b.Token, current())
	out, err = begin("k3", b)
	require.NoError(t, err)
	require.Equal(t, idemstore.StateNew, out.State, "a stale holder claimed nothing")
}

// A holder the guard is at already meets every kind of record through the
// claim alone (which claims nothing where the key has a record) and then
// the whole statement: in flight, another fingerprint, completed (a
// replay), and dead (taken over); each answered as the whole statement
// alone would.
func TestPostgresHeldHolderMeetsEveryRecord(t *testing.T) {
	t.Parallel()
	st, f, count, _ := joinedStores(t)
	ctx := t.Context()
	a := fence.Holder{Scope: "job", Token: 1780000000000001, Owner: "a"}
	begin := func(key, fp string, ttl time.Duration, want idemstore.State, statements int64) idemstore.Outcome {
		t.Helper()
		before := count.n.Load()
		out, err := st.BeginFenced(ctx, key, fp, ttl, f, "/held", a)
		require.NoError(t, err)
		require.Equal(t, want, out.State, "key %s", key)
		require.Equal(t, statements, count.n.Load()-before, "statements for key %s", key)
		return out
	}
	// The whole statement (no hint yet), after the format checks of the
	// store and of the guard (a SELECT each), once.
	begin("first", fpA, long, idemstore.StateNew, 3)
	live := begin("live", fpA, long, idemstore.StateNew, 1) // the claim alone
	begin("live", fpA, long, idemstore.StateInFlight, 2)
	begin("live", "other", long, idemstore.StateMismatch, 2)
	require.NoError(t, st.Complete(ctx, "live", live.Lock, &idemstore.Response{Status: 201, Body: []byte("ok")}, long))
	replay := begin("live", fpA, long, idemstore.StateCompleted, 2)
	require.Equal(t, []byte("ok"), replay.Response.Body)
	crashed := begin("crashed", fpA, short, idemstore.StateNew, 1)
	testwait.Until(t, waitLimit, "the crashed claim's lock TTL passed", func() bool {
		out, err := st.BeginFenced(ctx, "crashed", fpA, long, f, "/held", a)
		require.NoError(t, err)
		if out.State != idemstore.StateNew {
			return false
		}
		require.NotEqual(t, crashed.Lock, out.Lock, "taken over with a new lock")
		return true
	})
}

func TestPostgresBeginFenced(t *testing.T) {
	t.Parallel()
	st, f, _, pool := joinedStores(t)
	ctx := t.Context()
	current := func(resource string) fence.Token {
		tok, _, err := f.Guard().Current(ctx, pool, resource, "job")
		require.NoError(t, err)
		return tok
	}
	h := func(tok fence.Token, owner string) fence.Holder {
		return fence.Holder{Scope: "job", Token: tok, Owner: owner}
	}

	t.Run("StaleTokenOnANewKeyClaimsNothing", func(t *testing.T) {
		_, err := st.BeginFenced(ctx, "stale-k0", fpA, long, f, "/stale", h(10, "a"))
		require.NoError(t, err)
		_, err = st.BeginFenced(ctx, "stale-k1", fpA, long, f, "/stale", h(9, "b"))
		var stale *fence.StaleTokenError
		require.ErrorAs(t, err, &stale)
		require.Equal(t, fence.Token(10), stale.Current)
		require.Equal(t, fence.Token(9), stale.Presented)
		idemstoretest.RequireState(t, st, "stale-k1", fpA, idemstore.StateNew) // the key was left free
	})
	t.Run("InFlightAndMismatchLeaveTheFence", func(t *testing.T) {
		out, err := st.BeginFenced(ctx, "live", fpA, long, f, "/live", h(10, "a"))
		require.NoError(t, err)
		require.Equal(t, idemstore.StateNew, out.State)
		out, err = st.BeginFenced(ctx, "live", fpA, long, f, "/live", h(20, "b"))
		require.NoError(t, err)
		require.Equal(t, idemstore.StateInFlight, out.State)
		out, err = st.BeginFenced(ctx, "live", "other", long, f, "/live", h(30, "b"))
		require.NoError(t, err)
		require.Equal(t, idemstore.StateMismatch, out.State)
		require.Equal(t, fence.Token(10), current("/live"))
	})
	t.Run("ReplayRaisesTheFenceAndAStaleReplayIsNoError", func(t *testing.T) {
		out, err := st.BeginFenced(ctx, "done", fpA, long, f, "/done", h(10, "a"))
		require.NoError(t, err)
		require.NoError(t, st.Complete(ctx, "done", out.Lock, &idemstore.Response{Status: 201, Body: []byte("ok")}, long))
		out, err = st.BeginFenced(ctx, "done", fpA, long, f, "/done", h(11, "b"))
		require.NoError(t, err)
		require.Equal(t, idemstore.StateCompleted, out.State)
		require.Equal(t, []byte("ok"), out.Response.Body)
		require.Equal(t, fence.Token(11), current("/done"))
		out, err = st.BeginFenced(ctx, "done", fpA, long, f, "/done", h(10, "a"))
		require.NoError(t, err, "the replay wins over the fence")
		require.Equal(t, idemstore.StateCompleted, out.State)
		require.Equal(t, fence.Token(11), current("/done"))
	})
	t.Run("AnAbandonedClaimIsTakenOver", func(t *testing.T) {
		out, err := st.BeginFenced(ctx, "crashed", fpA, short, f, "/crashed", h(10, "a"))
		require.NoError(t, err)
		old := out.Lock
		testwait.Until(t, waitLimit, "the crashed claim's lock TTL passed", func() bool {
			out, err = st.BeginFenced(ctx, "crashed", fpA, long, f, "/crashed", h(11, "b"))
			require.NoError(t, err)
			return out.State == idemstore.StateNew
		})
		require.NotEqual(t, old, out.Lock)
		require.ErrorIs(t, st.Complete(ctx, "crashed", old, &idemstore.Response{Status: 201}, long), idemstore.ErrLockLost)
		require.NoError(t, st.Complete(ctx, "crashed", out.Lock, &idemstore.Response{Status: 201}, long))
		require.Equal(t, fence.Token(11), current("/crashed"))
	})
	t.Run("AHolderTheGuardCannotTakeIsInvalidFencing", func(t *testing.T) {
		_, err := st.BeginFenced(ctx, "big", fpA, long, f, "/big", h(math.MaxUint64, "a"))
		require.ErrorIs(t, err, idemstore.ErrInvalidFencing)
		require.ErrorIs(t, err, pgfence.ErrTokenOutOfRange)
		idemstoretest.RequireState(t, st, "big", fpA, idemstore.StateNew) // abandoned again
	})
}

// A slot scope (fence.SplitSlotScope) is fenced by Begin and then
// Fence.Accept, under its unit's watermark, with BeginFenced's answers:
// once the slot is pruned (Fence.PruneSlotScopes), a request under its
// scope claims nothing and is answered 412 as stale, whatever its token,
// while a completed key still replays.
func TestPostgresBeginFencedSlotScope(t *testing.T) {
	t.Parallel()
	st, f, _, pool := joinedStores(t)
	ctx := t.Context()
	const unit = "settle|eu"
	slot := int64(1780000000)
	scope := fmt.Sprintf("%s@%d", unit, slot)
	h := func(tok fence.Token, owner string) fence.Holder {
		return fence.Holder{Scope: scope, Token: tok, Owner: owner}
	}

	out, err := st.BeginFenced(ctx, "s-k0", fpA, long, f, "/slot", h(10, "a"))
	require.NoError(t, err)
	require.Equal(t, idemstore.StateNew, out.State)
	require.NoError(t, st.Complete(ctx, "s-k0", out.Lock, &idemstore.Response{Status: 201, Body: []byte("ok")}, long))
	_, err = st.BeginFenced(ctx, "s-k1", fpA, long, f, "/slot", h(9, "b"))
	var stale *fence.StaleTokenError
	require.ErrorAs(t, err, &stale)
	require.Equal(t, fence.Token(10), stale.Current)
	idemstoretest.RequireState(t, st, "s-k1", fpA, idemstore.StateNew) // abandoned: the key is free

	n, err := f.PruneSlotScopes(ctx, "/slot", unit, time.Unix(slot+1, 0))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	tok, _, err := f.Guard().Current(ctx, pool, "/slot", scope)
	require.NoError(t, err)
	require.Equal(t, fence.None, tok, "the slot's guard row is gone")

	_, err = st.BeginFenced(ctx, "s-k2", fpA, long, f, "/slot", h(11, "c"))
	require.ErrorIs(t, err, fence.ErrScopeClosed, "a pruned slot stays closed, whatever the token")
	require.ErrorIs(t, err, fence.ErrStaleToken)
	idemstoretest.RequireState(t, st, "s-k2", fpA, idemstore.StateNew)
	out, err = st.BeginFenced(ctx, "s-k0", fpA, long, f, "/slot", h(9, "b"))
	require.NoError(t, err, "the replay wins over the closed scope")
	require.Equal(t, idemstore.StateCompleted, out.State)
	require.Equal(t, []byte("ok"), out.Response.Body)

	// Through the middleware: 412, the problem naming the closed scope.
	mw, err := httpfence.Middleware(httpfence.Options{Store: st, Fence: f, AllowUnauthenticatedFencing: true})
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodPost, "/slot", strings.NewReader("{}"))
	r.Header.Set(httpfence.KeyHeader, `"s-k3"`)
	r.Header.Set(httpfence.TokenHeader, "12")
	r.Header.Set(httpfence.OwnerHeader, `"d"`)
	r.Header.Set(httpfence.ScopeHeader, `"`+scope+`"`)
	rec := httptest.NewRecorder()
	mw(benchHandler).ServeHTTP(rec, r)
	require.Equal(t, http.StatusPreconditionFailed, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "closed")
}
