package lease_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/internal/miniconf"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

// Two replicas want the same lease: one gets it with a fencing token, the
// other learns who holds it and for how long.
func Example() {
	mr, _ := miniredis.Run()
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	// A Redis that may evict keys is refused. miniredis never evicts but,
	// like many managed Redis services, refuses CONFIG GET: declare its
	// policy.
	client, _ := lease.New(rdb, lease.Options{Eviction: redislease.Eviction{Policy: "noeviction"}})
	ctx := context.Background()

	l, err := client.TryAcquire(ctx, "daily-settlement", 30*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("held, token > 0:", l.Token() > 0)

	_, err = client.TryAcquire(ctx, "daily-settlement", 30*time.Second)
	fmt.Println("second replica:", errors.Is(err, lease.ErrNotAcquired))

	_ = l.Release(ctx)
	<-l.Done()
	fmt.Println("cause:", errors.Is(l.Err(), lease.ErrReleased))
	// Output:
	// held, token > 0: true
	// second replica: true
	// cause: true
}

// The context of Acquire bounds the wait only; WithLifetime ties the lease
// to a service's own context, so that shutdown ends it.
func ExampleWithLifetime() {
	mr, _ := miniredis.Run()
	miniconf.Register(mr) // CONFIG GET answers as a default Redis: noeviction
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	client, _ := lease.New(rdb, lease.Options{})

	app, shutdown := context.WithCancel(context.Background())
	defer shutdown()
	wait, cancel := context.WithTimeout(app, 300*time.Millisecond)
	defer cancel()
	l, err := client.Acquire(wait, "reindex", 30*time.Second, lease.WithLifetime(app))
	if err != nil {
		fmt.Println(err)
		return
	}
	cancel() // the wait is over: the lease lives on
	fmt.Println("held after the wait's end:", l.Err() == nil)

	shutdown()
	<-l.Done()
	fmt.Println("cause:", errors.Is(l.Err(), lease.ErrParentDone))
	// Output:
	// held after the wait's end: true
	// cause: true
}
