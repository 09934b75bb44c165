package scheduler_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/internal/miniconf"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// Two replicas carry the same job, split by tenant. Each (slot, partition)
// runs once, on whichever replica takes that partition's lease, and the
// ledger records it. The replicas read a fake clock (Options.Clock) that
// the example moves on, as a test would: in production leave Clock unset.
func Example() {
	mr, err := miniredis.Run()
	if err != nil {
		fmt.Println(err)
		return
	}
	miniconf.Register(mr) // CONFIG GET answers as a default Redis: noeviction
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	// Two one-second slots, from 10:00:00 on the fake clock.
	start := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	clk := clock.NewFake(start.Add(-500 * time.Millisecond))
	var (
		mu   sync.Mutex
		runs = map[string]int{}
		ran  = make(chan struct{}, 16)
	)
	job := scheduler.Job{
		Name:       "daily-settlement",
		Spec:       "* * * * * *", // every second (seconds field first)
		Partitions: []string{"eu", "us"},
		StartAt:    start,
		EndAt:      start.Add(2 * time.Second),
		Run: func(ctx context.Context, run scheduler.Run) error {
			// Pass run.Token, run.Owner and run.IdempotencyKey to the
			// sinks; stop when ctx ends.
			mu.Lock()
			runs[run.IdempotencyKey]++
			mu.Unlock()
			ran <- struct{}{}
			return nil
		},
	}

	var replicas []*scheduler.Scheduler
	for range 2 {
		leases, _ := lease.New(rdb, lease.Options{})
		ldg, _ := redisledger.New(rdb, redisledger.Options{})
		s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ldg, Clock: clk})
		if err != nil {
			fmt.Println(err)
			return
		}
		if err := s.Register(job); err != nil {
			fmt.Println(err)
			return
		}
		replicas = append(replicas, s)
	}
	for _, s := range replicas {
		_ = s.Start(ctx)
	}
	for n := 0; n < 4; {
		select {
		case <-ran:
			n++
		case <-time.After(5 * time.Millisecond):
			clk.Advance(100 * time.Millisecond) // time passes
		}
	}
	for _, s := range replicas {
		_ = s.Stop(ctx) // drains: every attempt is recorded
	}

	ldg, _ := redisledger.New(rdb, redisledger.Options{})
	for i := range 2 {
		for _, p := range job.Partitions {
			slot := ledger.Slot{Job: job.Name, At: start.Add(time.Duration(i) * time.Second).UTC(), Partition: p}
			rec, _, _ := ldg.Get(ctx, slot)
			mu.Lock()
			n := runs[slot.Key()]
			mu.Unlock()
			fmt.Printf("slot %d %s: ran %d time(s), %s at attempt %d\n", i+1, p, n, rec.Status, rec.Attempt)
		}
	}
	// Output:
	// slot 1 eu: ran 1 time(s), succeeded at attempt 1
	// slot 1 us: ran 1 time(s), succeeded at attempt 1
	// slot 2 eu: ran 1 time(s), succeeded at attempt 1
	// slot 2 us: ran 1 time(s), succeeded at attempt 1
}
