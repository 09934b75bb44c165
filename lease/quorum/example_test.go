package quorum_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/quorum"
)

// A lease over three independent Redis masters: it is granted by a
// majority, carries a token that grows across holders, and needs two of
// the three masters. In-process miniredis servers stand in for the
// masters here; in production each is its own Redis deployment.
func Example() {
	var (
		servers []*miniredis.Miniredis
		masters []redis.UniversalClient
	)
	for range 3 {
		mr, _ := miniredis.Run()
		defer mr.Close()
		rdb := redis.NewClient(&redis.Options{
			Addr: mr.Addr(),
			// A master that is down or hung must not hold up every call.
			DialTimeout:   200 * time.Millisecond,
			ReadTimeout:   200 * time.Millisecond,
			WriteTimeout:  200 * time.Millisecond,
			PoolTimeout:   200 * time.Millisecond,
			DialerRetries: 1,
			MaxRetries:    1,
		})
		defer rdb.Close()
		servers, masters = append(servers, mr), append(masters, rdb)
	}
	backend, err := quorum.New(masters, quorum.Options{})
	if err != nil {
		panic(err)
	}
	client, err := lease.NewWithBackend(backend, lease.Options{})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()

	a, _ := client.TryAcquire(ctx, "settlement", 10*time.Second)
	fmt.Println("A holds the lease:", a.Err() == nil)
	_, err = client.TryAcquire(ctx, "settlement", 10*time.Second)
	fmt.Println("B is refused:", errors.Is(err, lease.ErrNotAcquired))
	_ = a.Release(ctx)

	// One master is lost: two of three are still a majority. B waits for
	// the lease (Acquire) rather than trying once: a try can lose to a
	// race on two masters, and the wait retries on the release.
	servers[0].Close()
	wait, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	b, _ := client.Acquire(wait, "settlement", 10*time.Second)
	fmt.Println("B holds it with one master down:", b.Err() == nil)
	fmt.Println("B's token is larger than A's:", b.Token() > a.Token())
	_ = b.Release(ctx)

	// Two are lost: no majority answers.
	servers[1].Close()
	_, err = client.TryAcquire(ctx, "settlement", 10*time.Second)
	var nq *quorum.NoQuorumError
	if errors.As(err, &nq) {
		fmt.Printf("no quorum: %d of %d masters answered, %d needed\n", nq.Answered, nq.Nodes, nq.Quorum)
	}
	// Output:
	// A holds the lease: true
	// B is refused: true
	// B holds it with one master down: true
	// B's token is larger than A's: true
	// no quorum: 1 of 3 masters answered, 2 needed
}
