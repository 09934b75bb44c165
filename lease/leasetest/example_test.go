package leasetest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/miniconf"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasetest"
)

// ledger is a user's own sink: per resource, the highest token accepted
// and its owner, checked and written under one lock (fence.Check).
type ledger struct {
	mu      sync.Mutex
	token   map[string]fence.Token
	owner   map[string]string
	entries []string
}

func (l *ledger) Write(resource string, token fence.Token, owner, entry string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := fence.Check(resource, l.token[resource], l.owner[resource], token, owner); err != nil {
		return err
	}
	l.token[resource], l.owner[resource] = token, owner
	l.entries = append(l.entries, entry)
	return nil
}

// A holder pauses past its TTL, another replica takes over, and the first
// one wakes up and writes: the sink must refuse it. In a test, use
// NewMiniredisClient(t) or StartRedis(t) instead of starting miniredis by
// hand.
func Example() {
	mr, _ := miniredis.Run()
	miniconf.Register(mr) // CONFIG GET answers as a default Redis: noeviction
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	client, _ := lease.New(rdb, lease.Options{})
	ctx := context.Background()
	sink := &ledger{token: map[string]fence.Token{}, owner: map[string]string{}}

	a, _ := client.TryAcquire(ctx, "payout", time.Second)
	defer a.Release(ctx)
	fmt.Println("A writes:", sink.Write("payout", a.Token(), a.Holder().Owner, "A: first half"))

	// A stops the world (GC, VM freeze) for longer than its trust window...
	leasetest.Freeze(a)
	<-time.After(time.Until(a.Deadline()))
	// ...and Redis expires its key meanwhile.
	_ = leasetest.ForceExpire(ctx, rdb, client, "payout")

	b, _ := client.TryAcquire(ctx, "payout", time.Minute)
	defer b.Release(ctx)
	fmt.Println("B writes:", sink.Write("payout", b.Token(), b.Holder().Owner, "B: everything"))
	fmt.Println("A, frozen, still believes it holds the lease:", a.Err() == nil)

	leasetest.Thaw(a)
	<-a.Done()
	fmt.Println("A learns it lost the lease:", errors.Is(a.Err(), lease.ErrExpired))

	// A write already on its way when A resumed arrives with A's token.
	err := sink.Write("payout", a.Token(), a.Holder().Owner, "A: second half")
	var stale *fence.StaleTokenError
	fmt.Println("A's late write refused:", errors.As(err, &stale) && stale.Current == b.Token())
	fmt.Println("ledger:", sink.entries)
	// Output:
	// A writes: <nil>
	// B writes: <nil>
	// A, frozen, still believes it holds the lease: true
	// A learns it lost the lease: true
	// A's late write refused: true
	// ledger: [A: first half B: everything]
}

// A unit test of code that holds leases, without Redis: a MemoryBackend
// behind the Client, its leases expired by a fake clock (Advance) or at
// once (Expire).
func ExampleNewMemoryBackend() {
	clk := clock.NewFake(time.Date(2026, 3, 8, 2, 0, 0, 0, time.UTC))
	backend := leasetest.NewMemoryBackend(clk)
	a, _ := lease.NewWithBackend(backend, lease.Options{})
	b, _ := lease.NewWithBackend(backend, lease.Options{})
	ctx := context.Background()

	first, _ := a.TryAcquire(ctx, "report", time.Minute)
	defer first.Release(ctx)
	_, err := b.TryAcquire(ctx, "report", time.Minute)
	fmt.Println("b while a holds it:", errors.Is(err, lease.ErrNotAcquired))

	// a's replica stops renewing; the lease runs out on the fake clock.
	leasetest.Freeze(first)
	clk.Advance(time.Minute)
	second, _ := b.TryAcquire(ctx, "report", time.Minute)
	defer second.Release(ctx)
	fmt.Println("b after the TTL:", second.Token() > first.Token())

	backend.Expire("report") // as if second's TTL had run out
	owner, _ := backend.Holder("report")
	fmt.Printf("held by %q\n", owner)
	// Output:
	// b while a holds it: true
	// b after the TTL: true
	// held by ""
}
