package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/faultproxy"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/pgstore"
)

// TestHTTPRetriesThroughResetsAfterCommit: 8 concurrent clients send one
// POST per key through httpfence.Transport and a fault proxy to a server
// whose handler records an effect per request in Postgres, behind
// httpfence.Middleware over one PostgresStore. For a third of the keys the
// first attempt runs the handler, stores the answer, and then every
// connection through the proxy is reset (this one before its answer, the
// others wherever they are). Clients retry with the same key until they get
// an answer. Every key must have exactly one effect. Control: the same
// handler without the middleware, where the retry runs it again.
func TestHTTPRetriesThroughResetsAfterCommit(t *testing.T) {
	t.Parallel()
	const name = "http-reset"
	n := trials(1000)
	r := newReport(name, n, controls(n))
	pool := shared.Pool(t)
	schema := shared.Schema(t, "chaos_http_")
	ctx := context.Background()
	store, err := pgstore.NewStore(pool, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	require.NoError(t, store.Migrate(ctx))
	effects := pgx.Identifier{schema, "effects"}.Sanitize()
	_, err = pool.Exec(ctx, `CREATE TABLE `+effects+` (key text NOT NULL)`)
	require.NoError(t, err)

	// The effect outlives the request's context: a reset cancels
	// r.Context(), and an INSERT canceled after it committed would answer
	// 503, which the middleware does not store, so the retry would run the
	// handler again (seen here: 4 keys in 50 with 2 effects each).
	effect := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		if _, err := pool.Exec(context.WithoutCancel(r.Context()), `INSERT INTO `+effects+` (key) VALUES ($1)`, key); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "paid "+key)
	})
	// The client signs its fencing headers (the documented setup); without
	// a Verifier the middleware would refuse them.
	key := httpfence.Key{ID: "chaos", Secret: []byte("chaos-http-test-key-of-32-bytes!")}
	verifier, err := httpfence.NewVerifier(key)
	require.NoError(t, err)
	signer, err := httpfence.NewSigner(key)
	require.NoError(t, err)
	mw, err := httpfence.Middleware(httpfence.Options{Store: store, LockTTL: 10 * time.Second, Verifier: verifier})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/pay", mw(effect))
	mux.Handle("/plain", effect) // the control: no idempotency

	var (
		proxy  *faultproxy.Proxy
		resets sync.Map // key -> struct{}: reset after its first attempt
		reset  = func(i int, control bool) bool { return control || i%3 == 0 }
		chosen sync.Map // key -> bool
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		if v, ok := chosen.Load(key); ok && v.(bool) {
			if _, again := resets.LoadOrStore(key, struct{}{}); !again {
				rec := httptest.NewRecorder()
				mux.ServeHTTP(rec, r) // committed, and stored by the middleware
				proxy.Reset()         // ... and the answer never arrives
				return
			}
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	proxy, err = faultproxy.New(strings.TrimPrefix(srv.URL, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = proxy.Close() })

	base := &http.Transport{MaxIdleConnsPerHost: 16}
	t.Cleanup(base.CloseIdleConnections)
	client := &http.Client{Transport: &httpfence.Transport{Base: base, MaxAttempts: 8, BaseDelay: 2 * time.Millisecond, MaxDelay: 2 * time.Second, Signer: signer}}
	bar := newProgress(name, n+r.controls)

	// post sends one request for key until it gets an answer (at most 20
	// rounds of the Transport's retries).
	post := func(key, path string) error {
		var last error
		for range 20 {
			rctx, cancel := context.WithTimeout(httpfence.WithIdempotencyKey(fence.WithHolder(ctx, fence.Holder{Scope: "http-reset", Token: 1, Owner: "client"}), key), 20*time.Second)
			req, err := http.NewRequestWithContext(rctx, http.MethodPost, "http://"+proxy.Addr()+path, strings.NewReader(`{"amount":100}`))
			if err != nil {
				cancel()
				return err
			}
			resp, err := client.Do(req)
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if err == nil && resp.StatusCode != http.StatusCreated {
					err = fmt.Errorf("status %d", resp.StatusCode)
				}
			}
			cancel()
			if err == nil {
				return nil
			}
			last = err
		}
		return last
	}

	type job struct {
		key, path string
	}
	jobs := make(chan job)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for j := range jobs {
				if err := post(j.key, j.path); err != nil {
					errs <- fmt.Errorf("%s: %w", j.key, err)
					return
				}
				bar.step()
			}
		})
	}
	var resetKeys int
	func() {
		defer close(jobs)
		for i := range n + r.controls {
			control := i >= n
			key, path := fmt.Sprintf("key-%d", i), "/pay"
			if control {
				path = "/plain"
			}
			if reset(i, control) {
				resetKeys++
			}
			chosen.Store(`"`+key+`"`, reset(i, control))
			select {
			case jobs <- job{key, path}:
			case err := <-errs:
				t.Fatal(err)
			}
		}
	}()
	wg.Wait()
	close(errs)
	require.NoError(t, errors.Join(func() (all []error) {
		for err := range errs {
			all = append(all, err)
		}
		return all
	}()...))

	rows, err := pool.Query(ctx, `SELECT key, count(*) FROM `+effects+` GROUP BY key`)
	require.NoError(t, err)
	per := map[string]int{}
	for rows.Next() {
		var (
			k string
			c int
		)
		require.NoError(t, rows.Scan(&k, &c))
		per[k] = c
	}
	require.NoError(t, rows.Err())
	exactlyOnce := 0
	for i := range n + r.controls {
		c := per[fmt.Sprintf(`"key-%d"`, i)]
		switch {
		case i >= n && c > 1:
			r.fired++
		case i < n && c == 1:
			exactlyOnce++
		case i < n:
			r.violations++
			t.Logf("key-%d: %d effects", i, c)
		}
	}
	r.ratio("effects_per_key_exactly_1", exactlyOnce, n)
	r.add("reset_after_commit", resetKeys-r.controls)
	r.finish(t)
}
