package httpfence_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/fencerule/fenceruletest"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/httpfencetest"
	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore"
	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore/idemstoretest"
	"github.com/holdfast-go/holdfast/sinks/httpfence/pgstore"
	"github.com/holdfast-go/holdfast/sinks/httpfence/problem"
	"github.com/holdfast-go/holdfast/sinks/httpfence/redisstore"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// Behaviour particular to one implementation; the shared contract is in
// conformance_test.go.

func TestRedisFenceComparesTheWholeUint64Range(t *testing.T) {
	t.Parallel()
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			rdb := b.New(t)
			f := newRedisFence(t, rdb, redistest.Prefix(t, rdb))
			ctx := context.Background()
			// Above 2^53 doubles round: 2^53 and 2^53+1 are one double.
			require.NoError(t, f.Accept(ctx, "r", fence.Holder{Token: 1<<53 + 1, Owner: "a"}))
			require.ErrorIs(t, f.Accept(ctx, "r", fence.Holder{Token: 1 << 53, Owner: "b"}), fence.ErrStaleToken)
			require.NoError(t, f.Accept(ctx, "r", fence.Holder{Token: math.MaxUint64 - 1, Owner: "a"}))
			err := f.Accept(ctx, "r", fence.Holder{Token: math.MaxUint64 - 1, Owner: "b"})
			var stale *fence.StaleTokenError
			require.ErrorAs(t, err, &stale)
			require.Equal(t, fence.Token(math.MaxUint64-1), stale.Current)
			require.NoError(t, f.Accept(ctx, "r", fence.Holder{Token: math.MaxUint64, Owner: "b"}))
		})
	}
}

func TestRedisStoresShareOneServerByPrefix(t *testing.T) {
	t.Parallel()
	rdb := redistest.Real(t)
	prefix := redistest.Prefix(t, rdb)
	a, b := newRedisStore(t, rdb, prefix+"a:"), newRedisStore(t, rdb, prefix+"b:")
	ctx := context.Background()
	for _, s := range []*redisstore.Store{a, b} {
		out, err := s.Begin(ctx, "k", "fp", long)
		require.NoError(t, err)
		require.Equal(t, idemstore.StateNew, out.State)
	}
	keys, err := rdb.Keys(ctx, prefix+"*").Result()
	require.NoError(t, err)
	require.Len(t, keys, 4, "a record and a format marker per prefix")
	for _, k := range keys {
		if strings.HasSuffix(k, ":format") {
			require.Regexp(t, `^`+prefix+`[ab]:format$`, k, "the stored format's marker")
			require.Equal(t, "holdfast sinks/httpfence/redisstore.Store format 1", rdb.Get(ctx, k).Val())
			continue
		}
		require.Regexp(t, `^`+prefix+`[ab]:\{[0-9a-f]{64}\}$`, k, "one hash-tagged key per record")
	}
}

func TestPostgresStoreConfig(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	for _, bad := range []string{"Upper", "1digit", "semi;colon", "quote\"d"} {
		_, err := pgstore.NewStore(pool, pgstore.Options{Schema: bad})
		require.ErrorIs(t, err, httpfence.ErrInvalidOptions, bad)
	}
	_, err := pgstore.NewStore(nil, pgstore.Options{})
	require.ErrorIs(t, err, httpfence.ErrInvalidOptions)
	_, err = pgstore.NewFence(pool, pgfence.Options{Schema: "Bad"})
	require.ErrorIs(t, err, pgfence.ErrInvalidOptions)
}

func TestPostgresMigrateIsIdempotentAndConcurrent(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	schema := newSchema(t)
	store, err := pgstore.NewStore(pool, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	f, err := pgstore.NewFence(pool, pgfence.Options{Schema: schema})
	require.NoError(t, err)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		wg.Go(func() {
			if i%2 == 0 {
				errs <- store.Migrate(context.Background())
			} else {
				errs <- f.Migrate(context.Background())
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.NoError(t, store.Migrate(context.Background()))
}

func TestPostgresDeleteExpired(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	store, err := pgstore.NewStore(pool, pgstore.Options{Schema: newSchema(t)})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, store.Migrate(ctx))

	var nilCtx context.Context
	require.ErrorIs(t, store.Migrate(nilCtx), idemstore.ErrNilContext)
	_, err = store.DeleteExpired(nilCtx)
	require.ErrorIs(t, err, idemstore.ErrNilContext)

	lock := idemstoretest.Claim(t, store, "dead", fpA, short)
	idemstoretest.Claim(t, store, "live", fpA, long)
	var deleted int64
	testwait.Until(t, waitLimit, "the dead record is deleted", func() bool {
		deleted += mustDeleteExpired(t, store)
		return deleted == 1
	})
	require.ErrorIs(t, store.Complete(ctx, "dead", lock, &idemstore.Response{Status: 200}, long), idemstore.ErrLockLost)
	idemstoretest.RequireState(t, store, "live", fpA, idemstore.StateInFlight)
	require.Zero(t, mustDeleteExpired(t, store))
}

func mustDeleteExpired(t *testing.T, s *pgstore.Store) int64 {
	t.Helper()
	n, err := s.DeleteExpired(context.Background())
	require.NoError(t, err)
	return n
}

func TestPostgresFenceSharesThePgfenceGuard(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	f, err := pgstore.NewFence(pool, pgfence.Options{Schema: newSchema(t)})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, f.Migrate(ctx))
	require.NoError(t, f.Accept(ctx, "/settle", fence.Holder{Token: 10, Owner: "a"}))
	tok, owner, err := f.Guard().Current(ctx, pool, "/settle", "")
	require.NoError(t, err)
	require.Equal(t, fence.Token(10), tok)
	require.Equal(t, "a", owner)
	err = f.Accept(ctx, "/settle", fence.Holder{Token: math.MaxUint64, Owner: "a"})
	require.ErrorIs(t, err, pgfence.ErrTokenOutOfRange)
	require.ErrorIs(t, err, idemstore.ErrInvalidFencing, "the middleware's 400, without importing pgfence")

	// The middleware answers it with 400, not 503.
	mw, err := httpfence.Middleware(httpfence.Options{Store: httpfencetest.NewMemoryStore(), Fence: f, MaxTokenAhead: -1, AllowUnauthenticatedFencing: true})
	require.NoError(t, err)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/settle", strings.NewReader("{}"))
	req.Header.Set(httpfence.KeyHeader, `"k1"`)
	req.Header.Set(httpfence.TokenHeader, "18446744073709551615")
	req.Header.Set(httpfence.OwnerHeader, "a")
	mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { t.Error("handler ran") })).ServeHTTP(rec, req)
	require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), problem.InvalidFencing)
}

// The shared case table of the acceptance rule, through each FenceStore.
func TestFenceStoresPassTheRuleTable(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s stores) {
		limit := fence.Token(math.MaxUint64)
		if _, ok := s.fence.(*pgstore.Fence); ok {
			limit = math.MaxInt64 // a bigint column
		}
		fenceruletest.Run(t, "/rule/", limit, s.fence.Accept)
	})
}

// A typed nil pool is refused at construction instead of panicking on the
// first request.
func TestPostgresConstructorsRefuseATypedNilPool(t *testing.T) {
	t.Parallel()
	var pool *pgxpool.Pool
	_, err := pgstore.NewStore(pool, pgstore.Options{})
	require.ErrorIs(t, err, httpfence.ErrInvalidOptions)
	_, err = pgstore.NewFence(pool, pgfence.Options{})
	require.ErrorIs(t, err, httpfence.ErrInvalidOptions)
}

// The Redis fence's record of (resource, scope) is named by the
// length-prefixed pair, for scope "" too (issue 31): scope "" with
// resource "5:hello:/pay" has a record of its own, not the one of scope
// "hello" with resource "/pay".
func TestRedisFenceNamesLengthPrefixedPairs(t *testing.T) {
	t.Parallel()
	rdb := redistest.Real(t)
	prefix := redistest.Prefix(t, rdb)
	ctx := context.Background()
	name := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return prefix + "{" + hex.EncodeToString(sum[:]) + "}"
	}
	f := newRedisFence(t, rdb, prefix)
	require.NoError(t, f.Accept(ctx, "/pay", fence.Holder{Scope: "hello", Token: 100, Owner: "replica-1"}))
	require.Equal(t, "100", rdb.HGet(ctx, name("5:hello:/pay"), "token").Val())
	require.NoError(t, f.Accept(ctx, "5:hello:/pay", fence.Holder{Token: 1, Owner: "replica-2"}), "a fence of its own")
	require.Equal(t, "1", rdb.HGet(ctx, name("0::5:hello:/pay"), "token").Val())
	err := f.Accept(ctx, "/pay", fence.Holder{Scope: "hello", Token: 50, Owner: "replica-3"})
	var stale *fence.StaleTokenError
	require.ErrorAs(t, err, &stale)
	require.Equal(t, fence.StaleTokenError{Resource: "/pay", Scope: "hello", Presented: 50, Current: 100}, *stale)
}
