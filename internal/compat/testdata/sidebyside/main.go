// Command sidebyside is the worker of internal/compat's side-by-side test:
// the same source is built against this tree and against an earlier
// commit's (testdata/sidebyside_base), and both builds share one Redis and
// one PostgreSQL. It uses only API both commits have.
//
// Environment: REDIS_URL, DATABASE_URL, PREFIX (lease keys), SCHEMA
// (guard and effects tables), NAME (the lease and the resource), WHO (this
// build's name in effects), FENCE=off for the test's control: writes
// that skip the fence (a build that does not fence the others).
//
// Commands, one per line on stdin, one answer per line on stdout:
//
//	take   acquire NAME, write through redisfence and pgfence with its
//	       holder, release the lease and keep the holder: "took <token>"
//	write  write again with the kept holder: "redis=<r> pg=<r>", r one of
//	       ok, stale or err:<text>
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/sinks/pgfence"
	"github.com/holdfast-go/holdfast/sinks/redisfence"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "sidebyside:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	opts, err := redis.ParseURL(os.Getenv("REDIS_URL"))
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer pool.Close()
	name, who, schema := os.Getenv("NAME"), os.Getenv("WHO"), os.Getenv("SCHEMA")

	client, err := lease.New(rdb, lease.Options{Prefix: os.Getenv("PREFIX")})
	if err != nil {
		return err
	}
	w, err := redisfence.New(rdb)
	if err != nil {
		return err
	}
	guard, err := pgfence.New(pgfence.Options{Schema: schema})
	if err != nil {
		return err
	}
	if err := guard.Migrate(ctx, pool); err != nil {
		return err
	}
	// The test creates it before starting the workers: two CREATE TABLE
	// IF NOT EXISTS at once can fail in Postgres (pg_type's unique index).
	effects := pgx.Identifier{schema, "effects"}.Sanitize()

	fenced := os.Getenv("FENCE") != "off"
	write := func(h fence.Holder) (string, string) {
		var r string
		if fenced {
			r = result(w.Set(ctx, name, who+" "+h.Token.String(), h, 0))
		} else {
			r = result(rdb.Set(ctx, name, who+" "+h.Token.String(), 0).Err())
		}
		p := result(pgx.BeginTxFunc(ctx, pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
			if fenced {
				if err := guard.Check(ctx, tx, name, h); err != nil {
					return err
				}
			}
			_, err := tx.Exec(ctx, `INSERT INTO `+effects+` VALUES ($1, $2)`, who, int64(h.Token))
			return err
		}))
		return r, p
	}

	var kept fence.Holder
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		switch cmd := strings.TrimSpace(in.Text()); cmd {
		case "take":
			l, err := client.TryAcquire(ctx, name, 10*time.Second)
			if err != nil {
				return fmt.Errorf("take: %w", err)
			}
			kept = l.Holder()
			r, p := write(kept)
			if err := l.Release(ctx); err != nil {
				return fmt.Errorf("release: %w", err)
			}
			fmt.Printf("took %d redis=%s pg=%s\n", kept.Token, r, p)
		case "write":
			r, p := write(kept)
			fmt.Printf("redis=%s pg=%s\n", r, p)
		default:
			return fmt.Errorf("unknown command %q", cmd)
		}
	}
	return in.Err()
}

func result(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, fence.ErrStaleToken):
		return "stale"
	default:
		return "err:" + strings.ReplaceAll(err.Error(), " ", "_")
	}
}
