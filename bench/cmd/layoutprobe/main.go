// Command layoutprobe compares the Redis CPU of a slot's bare commands
// under the two layouts of the Redis ledger (bench.LayoutFloor): v1, the
// layout until 2026-12-05 (a unit's fence, last slot, horizon, open and
// index zsets and one run hash per slot, each a key: the claim's 13
// commands, the finish's 6), and v2, stored format 1 (the fence, last
// slot, horizon and hot run in one unit hash, the run hash and index entry
// written at the finish: 7 and 6), in a keyspace of -units units (10,000)
// whose records grow slot by slot. It prints, per layout and slot,
//
//	probe: <layout> slot <n> claim_us_per_unit=<x> finish_us_per_unit=<x> total_us_per_unit=<x> keys=<n>
//
// from the server's used_cpu (INFO cpu). It starts a redis-server of its
// own for each layout run (or, with -redis, runs FLUSHALL before each on
// that server: point it at one nothing else uses). schedbench prints v2's
// figures as bench: scheduler_floor. Run it from bench/.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/bench"
	"github.com/holdfast-go/holdfast/internal/redisproc"
)

func main() {
	url := flag.String("redis", "", "Redis URL of a server nothing else uses (FLUSHALL runs on it); default: start one")
	units := flag.Int("units", 10000, "units (job, partition) per slot")
	slots := flag.Int("slots", 3, "slots per layout")
	rounds := flag.Int("rounds", 2, "runs of each layout, alternating")
	flag.Parse()
	if err := run(*url, *units, *slots, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "layoutprobe:", err)
		os.Exit(1)
	}
}

func run(url string, units, slots, rounds int) error {
	if units < 1 || slots < 1 || rounds < 1 {
		return errors.New("-units, -slots and -rounds must be positive")
	}
	ctx := context.Background()
	for r := range 2 * rounds {
		layout := []string{"v1", "v2"}[r%2]
		rdb, stop, err := server(ctx, url)
		if err != nil {
			return err
		}
		res, err := bench.LayoutFloor(ctx, rdb, "holdfast:", layout, units, slots)
		stop()
		if err != nil {
			return err
		}
		for s, f := range res {
			fmt.Printf("probe: %s slot %d claim_us_per_unit=%.1f finish_us_per_unit=%.1f total_us_per_unit=%.1f keys=%d\n",
				layout, s+1, us(f.Claim), us(f.Finish), us(f.Total()), f.Keys)
		}
	}
	return nil
}

// server is a client of url's server, flushed, or of a redis-server it
// starts; stop closes both.
func server(ctx context.Context, url string) (redis.UniversalClient, func(), error) {
	if url != "" {
		opts, err := redis.ParseURL(url)
		if err != nil {
			return nil, nil, err
		}
		rdb := redis.NewClient(opts)
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			rdb.Close()
			return nil, nil, err
		}
		return rdb, func() { rdb.Close() }, nil
	}
	s, err := redisproc.Launch()
	if err != nil {
		return nil, nil, err
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
	return rdb, func() { rdb.Close(); s.Close() }, nil
}

func us(d interface{ Seconds() float64 }) float64 { return d.Seconds() * 1e6 }
