// Command slotir counts the Redis server's instructions per slot of the
// scheduler's Redis ledger, against its layout's floor
// (bench.LayoutFloor, v2): a count that is the same on a busy host and an
// idle one, fast or slow, where schedbench's redis_us_per_slot (the
// server's CPU time) moves with the host's load. It starts a
// redis-server of its own under valgrind's callgrind (both must be on
// PATH; without them it prints a line saying so and exits 0), and counts
// (callgrind_control -z, then -d) what the server runs for:
//
//   - floor: the layout's bare commands for -units units' first slot,
//     then for their second slot, a minute later;
//   - holdfast: the joined claim (RedisLedger.ClaimAll, 256 units a call,
//     as the scheduler's batches) of the same number of units' first slot
//     by one owner, then the finish and release of each
//     (RedisLedger.FinishRelease, concurrent, joined as the scheduler's
//     runs are); then the same for their second slot, whose units'
//     records, fences and lease counters exist (schedbench's
//     scheduler_second).
//
// It prints
//
//	bench: scheduler_instructions units=<n> floor_ir_per_slot=<x> holdfast_ir_per_slot=<x> ratio_vs_floor=<x.xx> (claim <x> + finish <x>)
//	bench: scheduler_instructions_second units=<n> floor_ir_per_slot=<x> holdfast_ir_per_slot=<x> ratio_vs_floor=<x.xx> (claim <x> + finish <x>)
//
// It counts a slot's winner only: the replicas that find the unit held
// (schedbench's other replicas) are not in it. With -cluster the server
// is a one-master Redis Cluster (every slot on it), the ledger takes its
// Cluster path (one claim script and one finish script per unit, the
// pause flags read first), and it prints, with no floor (the floor's
// scripts span units, which a Cluster refuses),
//
//	bench: scheduler_instructions_cluster1 units=<n> holdfast_ir_per_slot=<x> (claim <x> + finish <x>)
//
// Run it from bench/; it takes about half a minute.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/holdfast-go/holdfast/bench"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/redislease"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

func main() {
	units := flag.Int("units", 1024, "units (job, partition) of the slot")
	cluster := flag.Bool("cluster", false, "a one-master Redis Cluster: the ledger's Cluster path, one script per unit")
	flag.Parse()
	if bin := bench.CallgrindMissing(); bin != "" {
		fmt.Printf("bench: scheduler_instructions skipped (%s not on PATH)\n", bin)
		return
	}
	if err := run(*units, *cluster); err != nil {
		fmt.Fprintln(os.Stderr, "slotir:", err)
		os.Exit(1)
	}
}

func run(units int, cluster bool) error {
	if units < 1 {
		return errors.New("-units must be positive")
	}
	ctx := context.Background()
	s, err := bench.StartCallgrind(ctx, cluster)
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.Zero(); err != nil {
		return err
	}
	var floor [2]int64 // per slot
	if !cluster {
		f, err := bench.NewFloor(s.Client, "floor:", "v2", units)
		if err != nil {
			return err
		}
		for i := range floor {
			if err := s.Zero(); err != nil {
				return err
			}
			if _, err := f.Slot(ctx); err != nil {
				return err
			}
			if floor[i], err = s.Count(); err != nil {
				return err
			}
		}
	}
	counts, err := holdfast(ctx, s, units, !cluster)
	if err != nil {
		return err
	}
	n := float64(units)
	if cluster {
		c := counts[0]
		fmt.Printf("bench: scheduler_instructions_cluster1 units=%d holdfast_ir_per_slot=%.0f (claim %.0f + finish %.0f)\n",
			units, float64(c.claim+c.finish)/n, float64(c.claim)/n, float64(c.finish)/n)
		return nil
	}
	for i, name := range []string{"scheduler_instructions", "scheduler_instructions_second"} {
		c := counts[i]
		fmt.Printf("bench: %s units=%d floor_ir_per_slot=%.0f holdfast_ir_per_slot=%.0f ratio_vs_floor=%.2f (claim %.0f + finish %.0f)\n",
			name, units, float64(floor[i])/n, float64(c.claim+c.finish)/n, float64(c.claim+c.finish)/float64(floor[i]), float64(c.claim)/n, float64(c.finish)/n)
	}
	return nil
}

// slotCount is the server's instructions for one slot's claims and for
// its finishes.
type slotCount struct{ claim, finish int64 }

// holdfast claims units' first slot and finishes every run, as one
// replica of the scheduler that wins them all, and returns the server's
// instructions for the claims and for the finishes; with second, then
// the same for the units' next slot, a minute later.
func holdfast(ctx context.Context, s *bench.Callgrind, units int, second bool) ([]slotCount, error) {
	b, err := redislease.NewBackend(s.Client, redislease.Options{Prefix: "hf:lease:"})
	if err != nil {
		return nil, err
	}
	l, err := redisledger.New(s.Client, redisledger.Options{Prefix: "hf:ledger:"})
	if err != nil {
		return nil, err
	}
	first := time.Now().Truncate(time.Minute)
	owner := "0123456789abcdef0123456789abcdef" // the lease package's owners are 32 hex digits
	req := func(job, part string, at, prev time.Time) ledger.ClaimRequest {
		return ledger.ClaimRequest{
			Lease: leasedriver.AcquireRequest{Name: ledger.UnitScope(job, part), Owner: owner, TTL: time.Minute},
			Begin: &ledger.BeginRequest{Slot: ledger.Slot{Job: job, Partition: part, At: at}, MaxAttempts: 1, Prev: prev, Since: first},
		}
	}
	// A first unit loads the scripts and checks the stored format: not
	// counted.
	if _, err := claimFinish(ctx, l, b, []ledger.ClaimRequest{req("warm", "w", first, time.Unix(0, 0))}, nil); err != nil {
		return nil, err
	}
	slots := []time.Time{first}
	if second {
		slots = append(slots, first.Add(time.Minute))
	}
	var out []slotCount
	prev := time.Unix(0, 0)
	for _, at := range slots {
		var all []ledger.ClaimRequest
		for u := range units {
			all = append(all, req(fmt.Sprintf("job%03d", u/100), fmt.Sprintf("p%03d", u%100), at, prev))
		}
		if err := s.Zero(); err != nil {
			return nil, err
		}
		var c slotCount
		_, err = claimFinish(ctx, l, b, all, func() error {
			c.claim, err = s.Count()
			return err
		})
		if err != nil {
			return nil, err
		}
		if c.finish, err = s.Count(); err != nil {
			return nil, err
		}
		out = append(out, c)
		prev = at
	}
	return out, nil
}

// claimFinish claims reqs in calls of 256, calls between (when not nil)
// once every claim is made, then finishes and releases every run
// concurrently.
func claimFinish(ctx context.Context, l *redisledger.Ledger, b *redislease.Backend, reqs []ledger.ClaimRequest, between func() error) (int, error) {
	var res []ledger.ClaimResult
	for i := 0; i < len(reqs); i += 256 {
		r, err := l.ClaimAll(ctx, b, reqs[i:min(i+256, len(reqs))], 0, time.Now())
		if err != nil {
			return 0, err
		}
		res = append(res, r...)
	}
	for i, x := range res {
		if x.Err != nil || x.Begin == nil || x.Begin.Attempt != 1 {
			return 0, fmt.Errorf("unit %s not begun: %+v", reqs[i].Lease.Name, x)
		}
	}
	if between != nil {
		if err := between(); err != nil {
			return 0, err
		}
	}
	errs := make([]error, len(res))
	var wg sync.WaitGroup
	for i, x := range res {
		wg.Go(func() {
			r := reqs[i]
			h := leasedriver.Held{Name: r.Lease.Name, Owner: r.Lease.Owner, TTL: r.Lease.TTL}
			f := ledger.Fence{Scope: r.Lease.Name, Token: x.Grant.Token, Owner: r.Lease.Owner}
			ferr, rerr := l.FinishRelease(ctx, b, h, r.Begin.Slot, f, 1, ledger.Outcome{Status: ledger.StatusSucceeded}, time.Now())
			errs[i] = errors.Join(ferr, rerr)
		})
	}
	wg.Wait()
	return len(res), errors.Join(errs...)
}
