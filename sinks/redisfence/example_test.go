package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/miniconf"
	"github.com/holdfast-go/holdfast/sinks/redisfence"
)

// A holder that paused past its lease writes late with its old token: the
// write is refused and the newer holder's value stays.
func ExampleWriter_Set() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	miniconf.Register(mr) // CONFIG GET answers as a default Redis: noeviction
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	ctx := context.Background()
	w, _ := redisfence.New(rdb)
	const key = "report:{2026-03-08}" // the hash tag keeps key and fence key in one Cluster slot

	fmt.Println(w.Set(ctx, key, "from replica-b", fence.Holder{Scope: "daily-settlement", Token: 1002, Owner: "replica-b"}, 24*time.Hour))

	err := w.Set(ctx, key, "from replica-a", fence.Holder{Scope: "daily-settlement", Token: 1001, Owner: "replica-a"}, 24*time.Hour)
	var stale *fence.StaleTokenError
	if errors.As(err, &stale) {
		fmt.Println("refused:", stale.Presented, "<", stale.Current)
	}
	fmt.Println(rdb.Get(ctx, key).Val())
	// Output:
	// <nil>
	// refused: 1001 < 1002
	// from replica-b
}

// A caller's own Lua runs only when the token passes, in the same script.
func ExampleNewScript() {
	mr := miniredis.NewMiniRedis()
	if err := mr.Start(); err != nil {
		panic(err)
	}
	miniconf.Register(mr) // CONFIG GET answers as a default Redis: noeviction
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()

	// Made once, reused: KEYS and ARGV are the caller's, as for EVAL.
	credit := redisfence.NewScript(`return redis.call('INCRBY', KEYS[1], ARGV[1])`)

	ctx := context.Background()
	w, _ := redisfence.New(rdb)
	balance, err := w.Eval(ctx, credit, []string{"balance:{acct-42}"}, fence.Holder{Scope: "credit-acct-42", Token: 7, Owner: "replica-a"}, 100)
	fmt.Println(balance, err)
	_, err = w.Eval(ctx, credit, []string{"balance:{acct-42}"}, fence.Holder{Scope: "credit-acct-42", Token: 6, Owner: "replica-old"}, 100)
	fmt.Println(errors.Is(err, fence.ErrStaleToken))
	// Output:
	// 100 <nil>
	// true
}
