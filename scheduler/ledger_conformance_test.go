package scheduler_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledgertest"
)

// TestRedisLedgerConformance runs the ledger conformance suite against
// RedisLedger on real Redis and on miniredis, each subtest under a key
// prefix of its own.
func TestRedisLedgerConformance(t *testing.T) {
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			ledgertest.Exercise(t, func(t *testing.T) scheduler.Ledger {
				rdb := b.New(t)
				l, err := scheduler.NewRedisLedger(rdb, redistest.Prefix(t, rdb)+"ledger:")
				require.NoError(t, err)
				return l
			})
		})
	}
}
