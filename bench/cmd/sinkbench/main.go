// Command sinkbench measures what fencing costs at the sinks, against a
// baseline measured in the same run:
//
//	bench: pg_update_<n>g plain=<ops/s> fenced=<ops/s> ratio=<fenced/plain>
//	bench: httpfence_pg_new_key holdfast_us=<x> baseline_us=<x> ratio=<holdfast/baseline>
//	bench: middleware_<store> bare_us=<x> store_us=<x> overhead_us=<x> ratio=<bare/store>
//
// pg_update compares a plain UPDATE (of the same columns: value, token,
// owner, scope) with pgfence.FencedUpdate on the same
// 64-row table, at 1 goroutine call by call and at 16 in runs of each
// (plain, fenced, fenced, plain, or the reverse), in rounds whose order
// alternates (medians of each, and the median of the per-round ratios).
// httpfence_pg_new_key compares the middleware over the Postgres stores (a
// new key per request) with one plain INSERT and one plain UPDATE of the
// same record table, per request, interleaved one call at a time within
// each round (the median of the per-round ratios). middleware compares a
// bare handler with the httpfence middleware
// (a new key per request: Begin, fence check, Complete) over the Redis and
// the Postgres stores. Run from bench/ with REDIS_URL and DATABASE_URL set
// (defaults: the local services).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore"
	"github.com/holdfast-go/holdfast/sinks/httpfence/pgstore"
	"github.com/holdfast-go/holdfast/sinks/httpfence/redisstore"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

func main() {
	rounds := flag.Int("rounds", 15, "alternating rounds per comparison")
	ops := flag.Int("ops", 1000, "operations per round")
	flag.Parse()
	if err := run(*rounds, *ops); err != nil {
		fmt.Fprintln(os.Stderr, "sinkbench:", err)
		os.Exit(1)
	}
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func run(rounds, ops int) error {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(env("DATABASE_URL", "postgres://root@127.0.0.1:5432/test?sslmode=disable"))
	if err != nil {
		return err
	}
	// Commit latency is the disk's, the same for both: take it out so the
	// comparison shows the statements.
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	cfg.MaxConns = 32
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema := "holdfast_sinkbench_" + hex.EncodeToString(b[:])
	defer func() { _, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE") }()

	if err := pgUpdate(ctx, pool, schema, rounds, ops); err != nil {
		return err
	}
	return middleware(ctx, pool, schema, rounds, ops)
}

func pgUpdate(ctx context.Context, pool *pgxpool.Pool, schema string, rounds, ops int) error {
	tbl := pgx.Identifier{schema, "bench"}
	if _, err := pool.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()+`;
CREATE TABLE `+tbl.Sanitize()+` (id int PRIMARY KEY, v text NOT NULL, fence_token bigint, fence_owner text, fence_scope text);
INSERT INTO `+tbl.Sanitize()+` (id, v) SELECT g, '' FROM generate_series(0, 63) g`); err != nil {
		return err
	}
	// The baseline writes the same columns as the fenced update (value,
	// token, owner, scope), without the acceptance rule (issue 36).
	plainSQL := `UPDATE ` + tbl.Sanitize() + ` SET v = $1, fence_token = $3, fence_owner = $4, fence_scope = $5 WHERE id = $2`
	var token atomic.Int64
	token.Store(1_700_000_000_000_000)
	plain := func(worker int) error {
		_, err := pool.Exec(ctx, plainSQL, "value", worker, token.Add(1), "bench-owner", "bench")
		return err
	}
	fenced := func(worker int) error {
		return pgfence.FencedUpdate(ctx, pool, pgfence.Row{Table: tbl, KeyColumn: "id", Key: worker},
			map[string]any{"v": "value"}, fence.Holder{Scope: "bench", Token: fence.Token(token.Add(1)), Owner: "bench-owner"})
	}
	// At one goroutine the two alternate call by call (interleaved), in
	// an order that alternates from round to round: a host whose round
	// trip changes speed for seconds at a time (a small VM's does, 20 to
	// 60 µs) then slows both alike, where rounds of 1,000 calls of one
	// and then the other measured the same build from 0.85 to 1.24. At 16
	// goroutines a call's time is mostly its wait behind the others', so
	// calls alternating within a run would hide the difference: each round
	// runs both twice instead, plain, fenced, fenced, plain (or the
	// reverse), so a load that rises or falls through a round falls on
	// both alike.
	p, f, ratio, err := paired(rounds, func(plainFirst bool) (float64, float64, error) {
		fns := []func(int) error{plain, fenced}
		if !plainFirst {
			fns = []func(int) error{fenced, plain}
		}
		means, err := interleaved(ops, fns...)
		if err != nil {
			return 0, 0, err
		}
		if !plainFirst {
			means[0], means[1] = means[1], means[0]
		}
		return 1e6 / means[0], 1e6 / means[1], nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("bench: pg_update_1g plain=%.0f fenced=%.0f ratio=%.2f\n", p, f, ratio)
	const g = 16
	p, f, ratio, err = paired(rounds, func(plainFirst bool) (float64, float64, error) {
		return abba(plainFirst, func() (float64, error) { return throughput(g, ops, plain) },
			func() (float64, error) { return throughput(g, ops, fenced) })
	})
	if err != nil {
		return err
	}
	fmt.Printf("bench: pg_update_%dg plain=%.0f fenced=%.0f ratio=%.2f\n", g, p, f, ratio)
	return nil
}

// paired runs rounds+1 rounds of run (the first warms up and is dropped),
// each measuring the baseline and the contender (one after the other,
// call by call, or in runs: run decides) with the one that goes first
// alternating from round to round, so that load from other processes
// falls on both alike. It returns the medians of each and the
// median of the per-round ratios contender/baseline, which a slow drift
// of the load moves less than the ratio of the medians.
func paired(rounds int, run func(baselineFirst bool) (base, cont float64, err error)) (mb, mc, ratio float64, err error) {
	var bs, cs, rs []float64
	for r := range rounds + 1 {
		b, c, err := run(r%2 == 0)
		if err != nil {
			return 0, 0, 0, err
		}
		if r > 0 {
			bs, cs, rs = append(bs, b), append(cs, c), append(rs, c/b)
		}
	}
	return median(bs), median(cs), median(rs), nil
}

// abba measures the throughputs (ops/s) of base and cont twice each, in
// the order base, cont, cont, base (cont, base, base, cont unless
// baseFirst), and returns each one's throughput over its two runs.
func abba(baseFirst bool, base, cont func() (float64, error)) (b, c float64, err error) {
	order := []func() (float64, error){base, cont, cont, base}
	if !baseFirst {
		order = []func() (float64, error){cont, base, base, cont}
	}
	var x [4]float64
	for i, run := range order {
		if x[i], err = run(); err != nil {
			return 0, 0, err
		}
	}
	// Two runs of the same ops: 2 / (1/x1 + 1/x2), the ops over the time.
	both := func(x1, x2 float64) float64 { return 2 / (1/x1 + 1/x2) }
	if baseFirst {
		return both(x[0], x[3]), both(x[1], x[2]), nil
	}
	return both(x[1], x[2]), both(x[0], x[3]), nil
}

// throughput runs ops calls of fn over g goroutines (worker w touches row
// w) and returns operations per second.
func throughput(g, ops int, fn func(worker int) error) (float64, error) {
	var wg sync.WaitGroup
	var firstErr atomic.Value
	start := time.Now()
	for w := range g {
		wg.Go(func() {
			for range ops / g {
				if err := fn(w); err != nil {
					firstErr.CompareAndSwap(nil, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := firstErr.Load().(error); err != nil {
		return 0, err
	}
	return float64(ops/g*g) / time.Since(start).Seconds(), nil
}

var handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(`{"id":7,"status":"settled"}`))
})

var seq atomic.Int64

func request() *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/settlements/2026-03-08", strings.NewReader(`{"total":1250}`))
	r.Header.Set("Idempotency-Key", `"k-`+strconv.FormatInt(seq.Add(1), 10)+`"`)
	r.Header.Set("Fencing-Token", "1780000000000001")
	r.Header.Set("Fencing-Owner", `"replica-a"`)
	return r
}

func middleware(ctx context.Context, pool *pgxpool.Pool, schema string, rounds, ops int) error {
	opts, err := redis.ParseURL(env("REDIS_URL", "redis://127.0.0.1:6379/0"))
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	prefix := "holdfast-sinkbench:" + schema + ":"
	defer func() {
		iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			rdb.Del(ctx, iter.Val())
		}
	}()
	pgStore, err := pgstore.NewStore(pool, pgstore.Options{Schema: schema})
	if err != nil {
		return err
	}
	if err := pgStore.Migrate(ctx); err != nil {
		return err
	}
	pgFence, err := pgstore.NewFence(pool, pgfence.Options{Schema: schema})
	if err != nil {
		return err
	}
	if err := pgFence.Migrate(ctx); err != nil {
		return err
	}
	redisStore, err := redisstore.NewStore(rdb, redisstore.Options{Prefix: prefix + "idem:"})
	if err != nil {
		return err
	}
	redisFence, err := redisstore.NewFence(rdb, redisstore.Options{Prefix: prefix + "fence:"})
	if err != nil {
		return err
	}
	stores := []struct {
		name  string
		store idemstore.Store
		fence idemstore.FenceStore
	}{
		{"redis", redisStore, redisFence},
		{"postgres", pgStore, pgFence},
	}
	serve := func(h http.Handler) func(int) error {
		return func(int) error {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, request())
			if rec.Code != http.StatusCreated {
				return fmt.Errorf("status %d: %s", rec.Code, rec.Body)
			}
			return nil
		}
	}
	if err := pgNewKey(ctx, pool, pgStore, pgFence, schema, rounds, ops); err != nil {
		return err
	}
	for _, s := range stores {
		mw, err := httpfence.Middleware(httpfence.Options{Store: s.store, Fence: s.fence, AllowUnauthenticatedFencing: true}) // the stores' cost; unsigned requests
		if err != nil {
			return err
		}
		var bare, with []float64
		for r := range rounds + 1 {
			b, err := throughput(1, ops, serve(handler))
			if err != nil {
				return err
			}
			w, err := throughput(1, ops/4, serve(mw(handler)))
			if err != nil {
				return err
			}
			if r > 0 {
				bare, with = append(bare, 1e6/b), append(with, 1e6/w)
			}
		}
		mb, mw2 := median(bare), median(with)
		fmt.Printf("bench: middleware_%s bare_us=%.1f store_us=%.1f overhead_us=%.1f ratio=%.3f\n",
			s.name, mb, mw2, mw2-mb, mb/mw2)
	}
	return nil
}

// pgNewKey compares what the middleware on the Postgres stores adds to a
// request with a new key (claim and fence check, Complete: the request
// through the middleware less the same request to the bare handler,
// measured back to back) with what the same record costs written by hand:
// one plain INSERT of the in-flight row and one plain UPDATE that
// completes it, on the store's own table. Both in µs per request; ratio =
// holdfast / baseline.
func pgNewKey(ctx context.Context, pool *pgxpool.Pool, st *pgstore.Store, f *pgstore.Fence, schema string, rounds, ops int) error {
	mw, err := httpfence.Middleware(httpfence.Options{Store: st, Fence: f, AllowUnauthenticatedFencing: true})
	if err != nil {
		return err
	}
	h := mw(handler)
	holdfast := func(int) error {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, request())
		if rec.Code != http.StatusCreated {
			return fmt.Errorf("status %d: %s", rec.Code, rec.Body)
		}
		return nil
	}
	tbl := pgx.Identifier{schema, "idempotency_keys"}.Sanitize()
	insertSQL := `INSERT INTO ` + tbl + ` (key, fingerprint, lock_id, expires_at) VALUES ($1, $2, $3, now() + interval '1 minute')`
	updateSQL := `UPDATE ` + tbl + ` SET lock_id = NULL, status = $2, header = $3::jsonb, body = $4, expires_at = now() + interval '1 day' WHERE key = $1`
	baseline := func(int) error {
		key := "base-" + strconv.FormatInt(seq.Add(1), 10)
		if _, err := pool.Exec(ctx, insertSQL, key, "fingerprint", "lock"); err != nil {
			return err
		}
		_, err := pool.Exec(ctx, updateSQL, key, 201, `{"Content-Type":["application/json"]}`, []byte(`{"id":7,"status":"settled"}`))
		return err
	}
	bare := func(int) error {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, request())
		return nil
	}
	// Each round interleaves the three one call at a time (baseline,
	// request through the middleware, the same request to the bare
	// handler: what the middleware adds is the difference of the last
	// two), so that what else the host and the database do (a checkpoint,
	// autovacuum, another process) falls on all three alike; rounds of
	// whole runs of one then the other swung the ratio from 1.36 to 2.01
	// with the same build.
	b, c, ratio, err := paired(rounds, func(bool) (float64, float64, error) {
		means, err := interleaved(ops, baseline, holdfast, bare)
		if err != nil {
			return 0, 0, err
		}
		return means[0], means[1] - means[2], nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("bench: httpfence_pg_new_key holdfast_us=%.1f baseline_us=%.1f ratio=%.2f\n", c, b, ratio)
	return nil
}

// interleaved calls fns one after another, n times over, and returns the
// mean µs per call of each.
func interleaved(n int, fns ...func(int) error) ([]float64, error) {
	total := make([]time.Duration, len(fns))
	for range n {
		for i, fn := range fns {
			start := time.Now()
			if err := fn(0); err != nil {
				return nil, err
			}
			total[i] += time.Since(start)
		}
	}
	means := make([]float64, len(fns))
	for i, d := range total {
		means[i] = float64(d) / float64(time.Microsecond) / float64(n)
	}
	return means, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}
