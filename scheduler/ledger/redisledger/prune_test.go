package redisledger

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// Prune walks a pair in batches, and a prefix holding glob metacharacters
// prunes its own ledger only: a ledger whose prefix the glob would match
// keeps its records.
func TestRedisLedgerPruneBatchesAndOwnPrefixOnly(t *testing.T) {
	for _, b := range redistest.Backends() {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			rdb := b.New(t)
			base := redistest.Prefix(t, rdb)
			l, err := New(rdb, Options{Prefix: base + "l*:"})
			require.NoError(t, err)
			other, err := New(rdb, Options{Prefix: base + "lx:"})
			require.NoError(t, err)

			at := func(i int) time.Time { return time.Unix(1_000_000_000, 0).UTC().Add(time.Duration(i) * time.Minute) }
			f := ledger.Fence{Scope: ledger.UnitScope("bulk", ""), Token: fence.Token(7), Owner: "a"}
			const many = PruneBatch*2 + 3
			for i := range many {
				require.NoError(t, l.Skip(ctx, ledger.Slot{Job: "bulk", At: at(i)}, f, ledger.StatusSkipped, "bulk", at(i)))
			}
			for i := range 2 { // slot 0 is not its State.Last: Prune would delete it
				require.NoError(t, other.Skip(ctx, ledger.Slot{Job: "bulk", At: at(i)}, f, ledger.StatusSkipped, "other", at(i)))
			}

			n, err := l.Prune(ctx, at(many))
			require.NoError(t, err)
			require.EqualValues(t, many-1, n, "every slot but the last (State.Last)")
			recs, err := l.List(ctx, "bulk", "", at(0), at(many), many)
			require.NoError(t, err)
			require.Len(t, recs, 1)
			require.Equal(t, at(many-1), recs[0].Slot.At)
			_, found, err := other.Get(ctx, ledger.Slot{Job: "bulk", At: at(0)})
			require.NoError(t, err)
			require.True(t, found, "the other prefix's record is kept")
		})
	}
}
