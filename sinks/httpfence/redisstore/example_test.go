package redisstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

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
