package redisledger_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/ledgertest"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// TestRedisLedgerConformance runs the ledger conformance suite against
// RedisLedger on real Redis and on miniredis, each subtest under a key
// prefix of its own.
func TestRedisLedgerConformance(t *testing.T) {
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			ledgertest.Exercise(t, func(t *testing.T) ledger.Ledger {
				rdb := b.New(t)
				l, err := redisledger.New(rdb, redisledger.Options{Prefix: redistest.Prefix(t, rdb) + "ledger:"})
				require.NoError(t, err)
				return l
			})
		})
	}
}
