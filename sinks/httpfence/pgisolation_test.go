package httpfence_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/pgstore"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// otherPool is a pool the Store does not recognise as its own, so that a
// Fence on it is not joined (the middleware calls Begin, then Accept).
type otherPool struct{ *pgxpool.Pool }

// Concurrent requests with the same keys and fence, through the middleware
// on the Postgres stores, are answered 201 or 409 (in flight) at every
// isolation level a database may default to, joined (BeginFenced) or not
// (Begin, then Fence.Accept): never 503. Under REPEATABLE READ or
// SERIALIZABLE, Begin and Accept failed with SQLSTATE 40001 and the
// middleware answered 503 store-unavailable when the stores' statements
// ran at the server's default level.
func TestPostgresConcurrentRequestsAtEveryIsolation(t *testing.T) {
	t.Parallel()
	const goroutines, requests = 8, 12
	for _, iso := range pgtest.Isolations {
		for _, joined := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/joined=%v", iso, joined), func(t *testing.T) {
				t.Parallel()
				pool := shared.PoolAt(t, iso)
				schema := newSchema(t)
				st, err := pgstore.NewStore(pool, pgstore.Options{Schema: schema})
				require.NoError(t, err)
				require.NoError(t, st.Migrate(t.Context()))
				var fdb pgstore.DB = pool
				if !joined {
					fdb = otherPool{pool}
				}
				f, err := pgstore.NewFence(fdb, pgfence.Options{Schema: schema})
				require.NoError(t, err)
				require.NoError(t, f.Migrate(t.Context()))
				require.Equal(t, joined, st.JoinsFence(f))
				mw, err := httpfence.Middleware(httpfence.Options{Store: st, Fence: f, AllowUnauthenticatedFencing: true}) // the stores under conflict; unsigned requests
				require.NoError(t, err)
				h := mw(benchHandler)

				var mu sync.Mutex
				codes := map[int]int{}
				var wg sync.WaitGroup
				for g := range goroutines {
					wg.Go(func() {
						for i := range requests {
							r := httptest.NewRequest(http.MethodPost, "/settle", strings.NewReader("{}"))
							r.Header.Set(httpfence.KeyHeader, fmt.Sprintf(`"k%d"`, (g+i)%3))
							r.Header.Set(httpfence.TokenHeader, "1780000000000001")
							r.Header.Set(httpfence.OwnerHeader, `"a"`)
							rec := httptest.NewRecorder()
							h.ServeHTTP(rec, r)
							mu.Lock()
							codes[rec.Code]++
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				t.Logf("%s joined=%v: %v", iso, joined, codes)
				for code := range codes {
					require.Contains(t, []int{http.StatusCreated, http.StatusConflict}, code, "answers: %v", codes)
				}
				require.Equal(t, goroutines*requests, codes[http.StatusCreated]+codes[http.StatusConflict])
			})
		}
	}
}
