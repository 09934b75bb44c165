package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/miniconf"
	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore"
	"github.com/holdfast-go/holdfast/sinks/httpfence/redisstore"
)

// The Store contract, on Redis (here miniredis): Begin claims a key once,
// Complete stores the answer, and Begin then hands it back.
func ExampleNewStore() {
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
	store, err := redisstore.NewStore(rdb, redisstore.Options{Prefix: "billing:idem:"})
	if err != nil {
		fmt.Println(err)
		return
	}
	out, _ := store.Begin(ctx, "order-7", "fp", time.Minute)
	fmt.Println(out.State)
	again, _ := store.Begin(ctx, "order-7", "fp", time.Minute)
	fmt.Println(again.State)

	_ = store.Complete(ctx, "order-7", out.Lock, &idemstore.Response{Status: 201, Body: []byte("ok")}, 24*time.Hour)
	done, _ := store.Begin(ctx, "order-7", "fp", time.Minute)
	fmt.Println(done.State, done.Response.Status, string(done.Response.Body))
	// Output:
	// new
	// in-flight
	// completed 201 ok
}

// Under OverlapAllow every slot's lease is a scope of its own; pruning the
// unit's slots before a cutoff deletes their fences and closes them, so a
// stale holder of a pruned slot stays refused.
func ExampleFence_PruneSlotScopes() {
	mr, err := miniredis.Run()
	if err != nil {
		fmt.Println(err)
		return
	}
	miniconf.Register(mr)
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	ctx := context.Background()
	f, err := redisstore.NewFence(rdb, redisstore.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	slot := time.Date(2026, 3, 8, 0, 0, 0, 0, time.UTC)
	stale := fence.Holder{Scope: fmt.Sprintf("settle|eu@%d", slot.Unix()), Token: 5, Owner: "replica-1"}
	fmt.Println(f.Accept(ctx, "/settle", stale))

	n, err := f.PruneSlotScopes(ctx, "/settle", "settle|eu", slot.Add(time.Hour))
	fmt.Println(n, err)
	err = f.Accept(ctx, "/settle", stale)
	fmt.Println(errors.Is(err, fence.ErrScopeClosed), errors.Is(err, fence.ErrStaleToken))
	// Output:
	// <nil>
	// 1 <nil>
	// true true
}
