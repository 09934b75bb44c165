package election_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/election"
	"github.com/holdfast-go/holdfast/internal/miniconf"
	"github.com/holdfast-go/holdfast/lease"
)

// Two replicas campaign; one leads until it resigns, then the other takes
// over with a larger fencing token. Anyone can ask who leads.
func Example() {
	mr, _ := miniredis.Run()
	miniconf.Register(mr) // CONFIG GET answers as a default Redis: noeviction
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	newReplica := func() *election.Election {
		client, _ := lease.New(rdb, lease.Options{})
		e, _ := election.New(client, "billing-leader", election.Options{TTL: 10 * time.Second})
		return e
	}
	first, second := newReplica(), newReplica()

	ld1, _ := first.Campaign(ctx, "replica-1:8080")
	leader, _ := second.Leader(ctx)
	fmt.Println("leader:", leader.Value, "token matches:", leader.Token == ld1.Token())

	elected := make(chan *election.Leadership)
	go func() {
		ld2, _ := second.Campaign(ctx, "replica-2:8080") // waits for the leader to go
		elected <- ld2
	}()

	_ = ld1.Resign(ctx)
	fmt.Println("first term ended:", errors.Is(context.Cause(ld1.Context()), lease.ErrReleased))
	ld2 := <-elected
	defer ld2.Resign(ctx)
	leader, _ = first.Observe(ctx)
	fmt.Println("leader:", leader.Value, "larger token:", ld2.Token() > ld1.Token())
	// Output:
	// leader: replica-1:8080 token matches: true
	// first term ended: true
	// leader: replica-2:8080 larger token: true
}
