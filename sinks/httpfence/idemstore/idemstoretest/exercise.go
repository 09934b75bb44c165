package idemstoretest

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore"
)

const (
	long  = time.Hour             // a TTL no test outlives
	short = 50 * time.Millisecond // a TTL tests wait out by polling
	fpA   = "fingerprint-a"
	fpB   = "fingerprint-b"

	// waitLimit bounds the waits for an expiry (testwait.Until).
	waitLimit = 10 * time.Second
)

// Exercise runs the Store contract (see idemstore.Store) against stores
// made by newStore, a fresh one per subtest; advance lets time pass for the
// store's expiry (a fake clock's, or a real wait for a real store). Every
// implementation in this module passes it: the in-memory store of
// httpfencetest, redisstore and pgstore (the latter at each isolation
// level), as lease/leasedriver/leasedrivertest.Exercise and
// scheduler/ledger/ledgertest.Exercise do for their seams.
func Exercise(t *testing.T, newStore func(t *testing.T) (idemstore.Store, func(time.Duration))) {
	ctx := context.Background()
	sample := &idemstore.Response{
		Status: http.StatusCreated,
		Header: http.Header{"Content-Type": {"application/json"}, "X-Multi": {"b", "a", "b"}, "Location": {"/payments/7"}},
		Body:   []byte("{\"id\":7}\x00\xff\r\n binary"),
	}

	t.Run("NewKeyIsClaimedWithALock", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		out, err := s.Begin(ctx, "k", fpA, long)
		require.NoError(t, err)
		require.Equal(t, idemstore.StateNew, out.State)
		require.NotEmpty(t, out.Lock)
		require.Nil(t, out.Response)
	})

	t.Run("SameFingerprintWhileInFlightIsInFlight", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		first := Claim(t, s, "k", fpA, long)
		out, err := s.Begin(ctx, "k", fpA, long)
		require.NoError(t, err)
		require.Equal(t, idemstore.StateInFlight, out.State)
		require.Empty(t, out.Lock)
		require.NoError(t, s.Complete(ctx, "k", first, sample, long), "the second Begin changed nothing")
	})

	t.Run("InFlightSaysHowLongTheLockHolds", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		Claim(t, s, "k", fpA, long)
		out, err := s.Begin(ctx, "k", fpA, 2*long) // the holder's lock TTL counts, not the asker's
		require.NoError(t, err)
		require.Equal(t, idemstore.StateInFlight, out.State)
		require.LessOrEqual(t, out.LockLeft, long)
		require.Greater(t, out.LockLeft, long-time.Minute, "the lock was claimed moments ago")
	})

	t.Run("OtherFingerprintIsMismatchInFlightAndCompleted", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		lock := Claim(t, s, "k", fpA, long)
		RequireState(t, s, "k", fpB, idemstore.StateMismatch)
		require.NoError(t, s.Complete(ctx, "k", lock, sample, long))
		RequireState(t, s, "k", fpB, idemstore.StateMismatch)
		RequireState(t, s, "k", fpA, idemstore.StateCompleted)
	})

	t.Run("CompletedReplaysTheStoredResponseExactly", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		for key, resp := range map[string]*idemstore.Response{
			"full":  sample,
			"empty": {Status: http.StatusNoContent, Header: http.Header{}, Body: []byte{}},
		} {
			lock := Claim(t, s, key, fpA, long)
			require.NoError(t, s.Complete(ctx, key, lock, resp, long))
			for range 2 { // replaying changes nothing
				out, err := s.Begin(ctx, key, fpA, long)
				require.NoError(t, err)
				require.Equal(t, idemstore.StateCompleted, out.State)
				require.Equal(t, resp, out.Response, key)
			}
		}
	})

	t.Run("CompleteAndAbandonNeedTheLock", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		lock := Claim(t, s, "k", fpA, long)
		require.ErrorIs(t, s.Complete(ctx, "k", "not-the-lock", sample, long), idemstore.ErrLockLost)
		require.ErrorIs(t, s.Abandon(ctx, "k", "not-the-lock"), idemstore.ErrLockLost)
		require.ErrorIs(t, s.Complete(ctx, "unknown", lock, sample, long), idemstore.ErrLockLost)
		require.ErrorIs(t, s.Abandon(ctx, "unknown", lock), idemstore.ErrLockLost)
		RequireState(t, s, "k", fpA, idemstore.StateInFlight)

		require.NoError(t, s.Complete(ctx, "k", lock, sample, long))
		require.ErrorIs(t, s.Complete(ctx, "k", lock, sample, long), idemstore.ErrLockLost, "completed once")
		require.ErrorIs(t, s.Abandon(ctx, "k", lock), idemstore.ErrLockLost, "a completed record is not abandoned")
		RequireState(t, s, "k", fpA, idemstore.StateCompleted)
	})

	t.Run("AbandonReleasesTheKey", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		lock := Claim(t, s, "k", fpA, long)
		require.NoError(t, s.Abandon(ctx, "k", lock))
		require.ErrorIs(t, s.Abandon(ctx, "k", lock), idemstore.ErrLockLost)
		// Any fingerprint may claim a released key.
		again := Claim(t, s, "k", fpB, long)
		require.NotEqual(t, lock, again)
	})

	t.Run("ExpiredLockIsTakenOverAndTheOldLockIsLost", func(t *testing.T) {
		t.Parallel()
		s, advance := newStore(t)
		old := Claim(t, s, "k", fpA, short)
		var taken idemstore.Outcome
		testwait.Until(t, waitLimit, "the expired lock is taken over", func() bool {
			advance(short)
			out, err := s.Begin(ctx, "k", fpB, long)
			require.NoError(t, err)
			taken = out
			return out.State == idemstore.StateNew
		})
		require.NotEqual(t, old, taken.Lock)
		require.ErrorIs(t, s.Complete(ctx, "k", old, sample, long), idemstore.ErrLockLost)
		require.ErrorIs(t, s.Abandon(ctx, "k", old), idemstore.ErrLockLost)
		require.NoError(t, s.Complete(ctx, "k", taken.Lock, sample, long))
	})

	t.Run("ExpiredLockWithoutTakeoverCannotComplete", func(t *testing.T) {
		t.Parallel()
		s, advance := newStore(t)
		lock := Claim(t, s, "k", fpA, short)
		// A sentinel claimed after k with the same TTL expires after it:
		// once the sentinel can be claimed again, k's lock has expired,
		// and nothing touched k meanwhile.
		Claim(t, s, "sentinel", fpA, short)
		testwait.Until(t, waitLimit, "the sentinel expired", func() bool {
			advance(short)
			out, err := s.Begin(ctx, "sentinel", fpA, long)
			require.NoError(t, err)
			return out.State == idemstore.StateNew
		})
		require.ErrorIs(t, s.Complete(ctx, "k", lock, sample, long), idemstore.ErrLockLost)
		Claim(t, s, "k", fpA, long)
	})

	t.Run("CompletedRecordExpiresAfterItsTTL", func(t *testing.T) {
		t.Parallel()
		s, advance := newStore(t)
		lock := Claim(t, s, "k", fpA, long)
		require.NoError(t, s.Complete(ctx, "k", lock, sample, short))
		testwait.Until(t, waitLimit, "the completed record expired", func() bool {
			advance(short)
			out, err := s.Begin(ctx, "k", fpB, long)
			require.NoError(t, err)
			return out.State == idemstore.StateNew
		})
	})

	t.Run("KeysAreIndependent", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		keys := []string{"a", "A", "a ", "{a}", "}a{", "tenant\x1fkey", "ключ", "settle:2026-03-08T02:00:00Z:eu"}
		locks := map[string]string{}
		for _, k := range keys {
			locks[k] = Claim(t, s, k, fpA, long)
		}
		for i, k := range keys {
			resp := &idemstore.Response{Status: 200 + i, Header: http.Header{}, Body: []byte(k)}
			require.NoError(t, s.Complete(ctx, k, locks[k], resp, long))
		}
		for i, k := range keys {
			out, err := s.Begin(ctx, k, fpA, long)
			require.NoError(t, err)
			require.Equal(t, idemstore.StateCompleted, out.State, k)
			require.Equal(t, 200+i, out.Response.Status, k)
			require.Equal(t, []byte(k), out.Response.Body, k)
		}
	})

	t.Run("ConcurrentBeginsClaimOnce", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		const n = 32
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			states = map[idemstore.State]int{}
			start  = make(chan struct{})
		)
		for range n {
			wg.Go(func() {
				<-start
				out, err := s.Begin(ctx, "k", fpA, long)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				states[out.State]++
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
		require.Equal(t, map[idemstore.State]int{idemstore.StateNew: 1, idemstore.StateInFlight: n - 1}, states)
	})

	t.Run("TTLBelowAMillisecondIsRefused", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		_, err := s.Begin(ctx, "k", fpA, 0)
		require.Error(t, err)
		lock := Claim(t, s, "k", fpA, long)
		require.Error(t, s.Complete(ctx, "k", lock, sample, time.Microsecond))
	})

	t.Run("NilContextIsRefusedAndWritesNothing", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		var nilCtx context.Context
		_, err := s.Begin(nilCtx, "k", fpA, long)
		require.ErrorIs(t, err, idemstore.ErrNilContext)
		lock := Claim(t, s, "k", fpA, long) // the refused Begin claimed nothing
		require.ErrorIs(t, s.Complete(nilCtx, "k", lock, sample, long), idemstore.ErrNilContext)
		require.ErrorIs(t, s.Abandon(nilCtx, "k", lock), idemstore.ErrNilContext)
		RequireState(t, s, "k", fpA, idemstore.StateInFlight) // neither completed nor abandoned it
		if fs, ok := s.(idemstore.FencedStore); ok {
			_, err := fs.BeginFenced(nilCtx, "k2", fpA, long, nil, "r", fence.Holder{Token: 1, Owner: "a"})
			require.ErrorIs(t, err, idemstore.ErrNilContext)
			Claim(t, s, "k2", fpA, long)
		}
	})
}

// Claim begins key with fp on s, requires it new (claimed), and returns
// its lock.
func Claim(t *testing.T, s idemstore.Store, key, fp string, ttl time.Duration) string {
	t.Helper()
	out, err := s.Begin(context.Background(), key, fp, ttl)
	require.NoError(t, err)
	require.Equal(t, idemstore.StateNew, out.State, "Begin(%q)", key)
	require.NotEmpty(t, out.Lock)
	return out.Lock
}

// RequireState requires Begin of key with fp on s (a lock TTL of an hour)
// to answer want, and abandons a key it claimed.
func RequireState(t *testing.T, s idemstore.Store, key, fp string, want idemstore.State) {
	t.Helper()
	out, err := s.Begin(context.Background(), key, fp, long)
	require.NoError(t, err)
	require.Equal(t, want, out.State, "Begin(%q, %q)", key, fp)
}
