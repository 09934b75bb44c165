// Command claimprobe measures the Redis CPU of the scheduler's joined
// claim scripts per unit, one phase at a time, with nothing else running:
// a batch of 256 units claimed by a first owner (win), then by a second
// while the first holds them (held: the units' claim groups are marked,
// so they are not tried), again with the markers gone (held_tried), each
// finished and released by the first, 256 concurrent calls
// (finishrelease), and claimed again by a third (done: marked again by
// held_tried's claim) and a fourth with the markers gone (done_tried).
// The figures are the server's used_cpu (INFO cpu) per unit, averaged
// over -rounds batches:
//
//	probe: us/unit win=<x> held=<x> held_tried=<x> finishrelease=<x> done=<x> done_tried=<x>
//
// Point it at a server nothing else uses (-redis, default $REDIS_URL or
// redis://127.0.0.1:6379/0): another client's commands count too. Run it
// from bench/.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/bench"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/redislease"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// cpu returns the server's CPU time so far.
func cpu(rdb *redis.Client) time.Duration {
	used, err := bench.ServerCPU(context.Background(), rdb)
	if err != nil {
		fail(err)
	}
	return used
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "claimprobe:", err)
	os.Exit(1)
}

func main() {
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	flag.StringVar(&url, "redis", url, "Redis URL")
	rounds := flag.Int("rounds", 20, "batches of 256 units")
	flag.Parse()
	opts, err := redis.ParseURL(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "claimprobe:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	rdb := redis.NewClient(opts)
	prefix := fmt.Sprintf("probe%d:", time.Now().UnixNano()%100000)
	b, err := redislease.NewBackend(rdb, redislease.Options{Prefix: prefix + "lease:"})
	if err != nil {
		fail(err)
	}
	l, err := redisledger.New(rdb, redisledger.Options{Prefix: prefix + "ledger:"})
	if err != nil {
		fail(err)
	}
	const n = 256
	at := time.Now().Truncate(time.Second)
	reqs := func(owner string, r int) []ledger.ClaimRequest {
		out := make([]ledger.ClaimRequest, n)
		for i := range out {
			job, part := fmt.Sprintf("job%03d", r), fmt.Sprintf("p%03d", i)
			name := ledger.UnitScope(job, part)
			out[i] = ledger.ClaimRequest{
				Lease: leasedriver.AcquireRequest{Name: name, Owner: owner, TTL: 10 * time.Second},
				Begin: &ledger.BeginRequest{Slot: ledger.Slot{Job: job, Partition: part, At: at}, MaxAttempts: 1, Prev: time.Unix(0, 0), Since: at},
			}
		}
		return out
	}
	unmark := func() {
		keys, err := rdb.Keys(ctx, prefix+"ledger:claimed:*").Result()
		if err != nil {
			fail(err)
		}
		if len(keys) > 0 {
			rdb.Del(ctx, keys...)
		}
	}
	var win, held, heldTried, fin, done, doneTried time.Duration
	for r := range *rounds {
		a, bq, c := reqs("owner-a", r), reqs("owner-b", r), reqs("owner-c", r)
		now := time.Now()
		c0 := cpu(rdb)
		res, err := l.ClaimAll(ctx, b, a, 0, now)
		if err != nil {
			fail(err)
		}
		c1 := cpu(rdb)
		if _, err := l.ClaimAll(ctx, b, bq, 0, now); err != nil {
			fail(err)
		}
		held += cpu(rdb) - c1
		unmark()
		c2a := cpu(rdb)
		if _, err := l.ClaimAll(ctx, b, reqs("owner-b2", r), 0, now); err != nil {
			fail(err)
		}
		heldTried += cpu(rdb) - c2a
		c2 := cpu(rdb)
		pipe := make(chan struct{}, n)
		for i, x := range res {
			if x.Begin == nil || x.Begin.Attempt != 1 {
				fail(fmt.Errorf("unit %d not begun: %+v %+v", i, x, x.Begin))
			}
			go func() {
				h := leasedriver.Held{Name: a[i].Lease.Name, Owner: "owner-a", TTL: 10 * time.Second}
				f := ledger.Fence{Scope: a[i].Lease.Name, Token: x.Grant.Token, Owner: "owner-a"}
				ferr, rerr := l.FinishRelease(ctx, b, h, a[i].Begin.Slot, f, 1, ledger.Outcome{Status: ledger.StatusSucceeded}, now)
				if ferr != nil || rerr != nil {
					fail(fmt.Errorf("finish and release: %v, %v", ferr, rerr))
				}
				pipe <- struct{}{}
			}()
		}
		for range res {
			<-pipe
		}
		c3 := cpu(rdb)
		if _, err := l.ClaimAll(ctx, b, c, 0, now); err != nil {
			fail(err)
		}
		c4 := cpu(rdb)
		unmark()
		c4a := cpu(rdb)
		if _, err := l.ClaimAll(ctx, b, reqs("owner-c2", r), 0, now); err != nil {
			fail(err)
		}
		doneTried += cpu(rdb) - c4a
		win, fin, done = win+c1-c0, fin+c3-c2, done+c4-c3
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(n**rounds) }
	fmt.Printf("probe: us/unit win=%.1f held=%.1f held_tried=%.1f finishrelease=%.1f done=%.1f done_tried=%.1f\n",
		per(win), per(held), per(heldTried), per(fin), per(done), per(doneTried))
	iter := rdb.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	for i := 0; i < len(keys); i += 500 {
		rdb.Del(ctx, keys[i:min(i+500, len(keys))]...)
	}
}
