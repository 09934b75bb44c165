package lease

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/redislease"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// roundTrips counts what a client sends: one per command outside a
// pipeline, one per pipeline. A new connection's handshake is not counted,
// nor an EVAL: the NOSCRIPT fallback after a SCRIPT FLUSH that a test
// running beside on the shared server sent (this package's
// TestTryAcquireAllRecoversFromNoScript, or another package's).
type roundTrips struct{ n atomic.Int64 }

func (r *roundTrips) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (r *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "hello" && name != "client" && name != "eval" {
			r.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (r *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && cmds[0].Name() != "client" && cmds[0].Name() != "eval" {
			r.n.Add(1)
		}
		return next(ctx, cmds)
	}
}

func TestTryAcquireAllTakesTheFreeLeasesInOneRoundTrip(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		other, err := New(s.rdb, Options{Prefix: s.prefix})
		require.NoError(t, err)
		held, err := other.TryAcquire(ctx, "b", 10*time.Second)
		require.NoError(t, err)
		defer release(t, held)
		// An earlier token of "c", which the batch must top.
		first, err := s.client.TryAcquire(ctx, "c", time.Second)
		require.NoError(t, err)
		release(t, first)

		var rt roundTrips
		s.rdb.AddHook(&rt)
		names := []string{"a", "b", "c", "", "d{x}"}
		leases, errs := s.client.TryAcquireAll(ctx, names, 5*time.Second)
		require.Equal(t, int64(1), rt.n.Load(), "round trips for the batch")
		require.Len(t, leases, len(names))
		require.Len(t, errs, len(names))

		require.NoError(t, errs[0])
		var notAcquired *NotAcquiredError
		require.ErrorAs(t, errs[1], &notAcquired)
		require.Equal(t, "b", notAcquired.Name)
		require.Greater(t, notAcquired.RemainingTTL, 5*time.Second, "the holder's remaining TTL")
		require.Nil(t, leases[1])
		require.NoError(t, errs[2])
		require.Greater(t, leases[2].Token(), first.Token(), "a token above every earlier one of the name")
		require.ErrorIs(t, errs[3], ErrInvalidName)
		require.ErrorIs(t, errs[4], ErrInvalidName)
		require.Nil(t, leases[3])
		require.NotEqual(t, leases[0].Holder().Owner, leases[2].Holder().Owner, "an owner per lease")

		// Leases of a batch are leases like any other: held, kept alive,
		// released one by one.
		for _, i := range []int{0, 2} {
			l := leases[i]
			require.NoError(t, l.Err())
			require.NoError(t, l.Context().Err())
			key, _ := KeysOf(s.client, names[i])
			owner, err := s.rdb.Get(ctx, key).Result()
			require.NoError(t, err)
			require.Equal(t, l.Holder().Owner, owner)
			release(t, l)
			require.ErrorIs(t, s.rdb.Get(ctx, key).Err(), redis.Nil, "released")
		}

		_, errs = s.client.TryAcquireAll(ctx, []string{"e", "f"}, 0)
		for _, err := range errs {
			require.ErrorIs(t, err, ErrInvalidTTL)
		}
	})
}

// After SCRIPT FLUSH the batch runs its scripts with EVAL, once each.
func TestTryAcquireAllRecoversFromNoScript(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		require.NoError(t, s.rdb.ScriptFlush(ctx).Err())
		leases, errs := s.client.TryAcquireAll(ctx, []string{"n1", "n2", "n3"}, 5*time.Second)
		for i, err := range errs {
			require.NoError(t, err, "lease %d", i)
			release(t, leases[i])
		}
		require.Equal(t, 3, s.hook.count("acquire"))
	})
}

// noBatch hides the built-in backend's AcquireAll.
type noBatch struct{ leasedriver.Backend }

// A backend without batches answers TryAcquireAll one acquisition at a
// time, with the same results.
func TestTryAcquireAllWithoutABatchBackend(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		c, err := NewWithBackend(noBatch{s.client.b}, Options{})
		require.NoError(t, err)
		held, err := s.client.TryAcquire(ctx, "busy", 10*time.Second)
		require.NoError(t, err)
		defer release(t, held)
		leases, errs := c.TryAcquireAll(ctx, []string{"free", "busy"}, 5*time.Second)
		require.NoError(t, errs[0])
		require.True(t, errors.Is(errs[1], ErrNotAcquired), "got %v", errs[1])
		require.True(t, strings.Contains(errs[1].Error(), "busy"))
		release(t, leases[0])
	})
}

// An acquisition the client sends twice (a pipeline re-sent after a lost
// reply or TRYAGAIN) answers the same token the second time, instead of
// leaving its own key orphaned for the TTL; another owner still gets the
// holder's remaining TTL.
func TestAcquireSentTwiceByOneOwnerAnswersItsToken(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		ctx := context.Background()
		b := s.client.b.(*redislease.Backend)
		g1, err := b.Acquire(ctx, "resent", "owner-a", 5*time.Second)
		require.NoError(t, err)
		require.True(t, g1.Acquired)
		g2, err := b.Acquire(ctx, "resent", "owner-a", 5*time.Second)
		require.NoError(t, err)
		require.True(t, g2.Acquired, "the same owner's re-sent acquisition")
		require.Equal(t, g1.Token, g2.Token)
		g3, err := b.Acquire(ctx, "resent", "owner-b", 5*time.Second)
		require.NoError(t, err)
		require.False(t, g3.Acquired)
		require.Greater(t, g3.Remaining, time.Duration(0))
		require.NoError(t, b.Release(ctx, leasedriver.Held{Name: "resent", Owner: "owner-a", TTL: 5 * time.Second}))
	})
}
