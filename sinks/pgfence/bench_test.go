package pgfence_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/pgtest"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
)

// BenchmarkUpdate compares a plain UPDATE with FencedUpdate on one table,
// each goroutine updating a row of its own (so the figures measure the
// statement, not row-lock queueing), over the shared pool:
//
//	plain:  UPDATE bench SET v = $1, fence_token = $3, fence_owner = $4, fence_scope = $5 WHERE id = $2
//	fenced: FencedUpdate(..., Row{bench, "id", id}, {"v": $1}, token, owner)
//
// with tokens that increase on every call, so every fenced write is
// accepted. The plain statement writes the same columns, without the rule
// (issue 36). The target is fenced throughput >= 0.97 x plain: compare ns/op
// of the plain and fenced sub-benchmarks at the same goroutine count.
//
// The benchmark's own pool sets synchronous_commit = off for its sessions:
// with it on, every autocommit UPDATE waits for a WAL flush, which costs the
// same for both and drowns the difference between the statements in disk
// noise.
func BenchmarkUpdate(b *testing.B) {
	pool := benchPool(b)
	schema := newSchema(b)
	tbl := pgx.Identifier{schema, "bench"}
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()+`;
CREATE TABLE `+tbl.Sanitize()+` (id int PRIMARY KEY, v text NOT NULL, fence_token bigint, fence_owner text, fence_scope text);
INSERT INTO `+tbl.Sanitize()+` (id, v) SELECT g, '' FROM generate_series(0, 63) g`); err != nil {
		b.Fatal(err)
	}
	plainSQL := `UPDATE ` + tbl.Sanitize() + ` SET v = $1, fence_token = $3, fence_owner = $4, fence_scope = $5 WHERE id = $2`
	var token atomic.Int64 // one counter: increasing per row as well

	ops := map[string]func(ctx context.Context, db *pgxpool.Pool, worker int) error{
		"plain": func(ctx context.Context, db *pgxpool.Pool, worker int) error {
			_, err := db.Exec(ctx, plainSQL, "value", worker, token.Add(1), "bench-owner", "")
			return err
		},
		"fenced": func(ctx context.Context, db *pgxpool.Pool, worker int) error {
			return pgfence.FencedUpdate(ctx, db, pgfence.Row{Table: tbl, KeyColumn: "id", Key: worker},
				map[string]any{"v": "value"}, fence.Holder{Token: fence.Token(token.Add(1)), Owner: "bench-owner"})
		},
	}
	// Plain and fenced alternate, so both see the table in the same state
	// (bloat, cache) and the same background load.
	for _, goroutines := range []int{1, 16} {
		for _, kind := range []string{"plain", "fenced"} {
			b.Run(fmt.Sprintf("%s/%dgoroutines", kind, goroutines), func(b *testing.B) {
				runWorkers(b, goroutines, func(worker int) error { return ops[kind](ctx, pool, worker) })
			})
		}
	}
}

// benchPool opens a pool of its own for BenchmarkUpdate (see there),
// closed when the benchmark ends.
func benchPool(b *testing.B) *pgxpool.Pool {
	b.Helper()
	return pgtest.OwnPool(b, func(cfg *pgxpool.Config) {
		cfg.MaxConns = 20
		cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	})
}

// runWorkers runs b.N calls of op spread over n goroutines, each with its
// worker number, and fails the benchmark on the first error.
func runWorkers(b *testing.B, n int, op func(worker int) error) {
	b.Helper()
	// Warm every worker's connection and prepared statement first.
	for w := range n {
		if err := op(w); err != nil {
			b.Fatal(err)
		}
	}
	var (
		next   atomic.Int64
		failed atomic.Pointer[error]
		wg     sync.WaitGroup
	)
	b.ResetTimer()
	for w := range n {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) && failed.Load() == nil {
				if err := op(w); err != nil {
					failed.CompareAndSwap(nil, &err)
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(*err)
	}
}
