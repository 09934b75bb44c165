package redisledger_test

import (
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// The default run ledger: one Redis for the leases and the ledger, each
// under a prefix of its own, given to the scheduler as Options.Ledger. Two
// deployments sharing a Redis give each their own prefixes.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: "redis.internal:6379"})
	defer rdb.Close()

	leases, err := lease.New(rdb, lease.Options{Prefix: "billing:lease:"})
	if err != nil {
		log.Fatal(err)
	}
	runs, err := redisledger.New(rdb, redisledger.Options{Prefix: "billing:ledger:"}) // "" for DefaultPrefix
	if err != nil {
		log.Fatal(err) // redisledger.ErrInvalidOptions: nil client, or '{' or '}' in the prefix
	}
	s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: runs})
	if err != nil {
		log.Fatal(err)
	}
	_ = s // Register jobs, then Start
}
