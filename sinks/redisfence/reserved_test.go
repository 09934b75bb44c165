package redisfence_test

import (
	"context"
	"time"

	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasejoin"
	"github.com/holdfast-go/holdfast/lease/redislease"
	"github.com/holdfast-go/holdfast/sinks/redisfence"
)

// TestHoldfastNamespaceRefused is the trial's attack (issues 31/32 trial
// §2): a redisfence resource named like lease victim's fence counter
// ("holdfast:lease:{victim}:fence") set to a value the lease script cannot
// INCR would break every acquire of victim for ever. Every key under
// "holdfast:" (lease, redisledger and redisstore defaults) is refused before
// Redis, nothing is written, and victim is still acquired; a prefix listed
// in Options.Reserved is refused the same way; ordinary keys (one with
// "holdfast:" only in its hash tag too) are written.
func TestHoldfastNamespaceRefused(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, b *bundle) {
		ctx := t.Context()
		victim := b.prefix + "victim"
		leases, err := lease.New(b.rdb, lease.Options{})
		require.NoError(t, err)
		keys, err := leasejoin.Backend(leases).(*redislease.Backend).Keys(victim)
		require.NoError(t, err)
		require.Equal(t, "holdfast:lease:{"+victim+"}:fence", keys.Fence)
		t.Cleanup(func() { b.rdb.Del(context.Background(), keys.Lease, keys.Fence) })

		h := fence.Holder{Token: 1, Owner: "attacker"}
		for name, err := range map[string]error{
			"LeaseFence":     b.w.Set(ctx, keys.Fence, "18446744073709551614", h, 0),
			"LeaseKey":       b.w.Set(ctx, keys.Lease, "x", h, 0),
			"LedgerHash":     b.w.HSet(ctx, "holdfast:ledger:{"+victim+"}", map[string]string{"state": "done"}, h),
			"IdemRecord":     b.w.Set(ctx, "holdfast:idem:"+victim, "x", h, 0),
			"HTTPFence":      b.w.Set(ctx, "holdfast:fence:"+victim, "x", h, 0),
			"Namespace":      b.w.Set(ctx, redisfence.Namespace, "x", h, 0),
			"EvalKeyInSpace": evalErr(b.w.Eval(ctx, redisfence.NewScript(`return 1`), []string{b.prefix + "{v}", keys.Fence}, h)),
		} {
			require.ErrorIs(t, err, redisfence.ErrReservedKey, name)
			require.ErrorIs(t, err, redisfence.ErrInvalidKey, name)
		}
		require.Zero(t, b.rdb.Exists(ctx, keys.Fence, keys.Lease, "holdfast:ledger:{"+victim+"}",
			"holdfast:idem:"+victim, "holdfast:fence:"+victim).Val(), "nothing written")

		l, err := leases.TryAcquire(ctx, victim, time.Minute)
		require.NoError(t, err, "lease victim is still acquired")
		require.Positive(t, uint64(l.Token()))
		require.NoError(t, l.Release(ctx))

		// Ordinary keys, one holding "holdfast:" only past its start.
		for _, key := range []string{b.prefix + "acct:1", b.prefix + "{holdfast:lease:}x", b.prefix + "holdfast:lease:{x}:fence"} {
			require.NoError(t, b.w.Set(ctx, key, "v", h, 0), key)
			require.Equal(t, "v", b.rdb.Get(ctx, key).Val(), key)
		}

		// A custom store prefix, listed in Reserved.
		custom := b.prefix + "myapp:lease:"
		w, err := redisfence.NewWithOptions(b.rdb, redisfence.Options{Reserved: []string{custom}})
		require.NoError(t, err)
		err = w.Set(ctx, custom+"{victim}:fence", "18446744073709551614", h, 0)
		require.ErrorIs(t, err, redisfence.ErrReservedKey)
		require.ErrorIs(t, w.Set(ctx, keys.Fence, "x", h, 0), redisfence.ErrReservedKey, "Namespace stays reserved")
		require.Zero(t, b.rdb.Exists(ctx, custom+"{victim}:fence").Val())
		require.NoError(t, w.Set(ctx, b.prefix+"myapp:data", "v", h, 0))
		require.NoError(t, b.w.Set(ctx, custom+"{other}", "v", h, 0), "the default Writer does not know the custom prefix")
	})
}

func TestReservedOptionRefusesAnEmptyPrefix(t *testing.T) {
	t.Parallel()
	_, err := redisfence.NewWithOptions(redistest.Mini(t), redisfence.Options{Reserved: []string{"app:lease:", ""}})
	require.ErrorIs(t, err, redisfence.ErrInvalidOptions)
}
