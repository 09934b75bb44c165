package httpfence_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/sinks/httpfence"
)

// The conformance suites: every Store and every FenceStore implementation
// meets the same contract (see the Store and FenceStore documentation).

func TestStoreConformance(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			exerciseStore(t, func(t *testing.T) (httpfence.Store, func(time.Duration)) {
				s := b.new(t)
				return s.store, s.advance
			})
		})
	}
}

func TestFenceConformance(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			exerciseFence(t, func(t *testing.T) httpfence.FenceStore { return b.new(t).fence })
		})
	}
}

const (
	long  = time.Hour             // a TTL no test outlives
	short = 50 * time.Millisecond // a TTL tests wait out by polling
	fpA   = "fingerprint-a"
	fpB   = "fingerprint-b"
)

// exerciseStore runs the Store contract against stores made by newStore,
// a fresh one per subtest. advance lets time pass for the store's expiry.
func exerciseStore(t *testing.T, newStore func(t *testing.T) (httpfence.Store, func(time.Duration))) {
	ctx := context.Background()
	sample := &httpfence.Response{
		Status: http.StatusCreated,
		Header: http.Header{"Content-Type": {"application/json"}, "X-Multi": {"b", "a", "b"}, "Location": {"/payments/7"}},
		Body:   []byte("{\"id\":7}\x00\xff\r\n binary"),
	}

	t.Run("NewKeyIsClaimedWithALock", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		out, err := s.Begin(ctx, "k", fpA, long)
		require.NoError(t, err)
		require.Equal(t, httpfence.StateNew, out.State)
		require.NotEmpty(t, out.Lock)
		require.Nil(t, out.Response)
	})

	t.Run("SameFingerprintWhileInFlightIsInFlight", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		first := begin(t, s, "k", fpA, long)
		out, err := s.Begin(ctx, "k", fpA, long)
		require.NoError(t, err)
		require.Equal(t, httpfence.StateInFlight, out.State)
		require.Empty(t, out.Lock)
		require.NoError(t, s.Complete(ctx, "k", first, sample, long), "the second Begin changed nothing")
	})

	t.Run("OtherFingerprintIsMismatchInFlightAndCompleted", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		lock := begin(t, s, "k", fpA, long)
		requireState(t, s, "k", fpB, httpfence.StateMismatch)
		require.NoError(t, s.Complete(ctx, "k", lock, sample, long))
		requireState(t, s, "k", fpB, httpfence.StateMismatch)
		requireState(t, s, "k", fpA, httpfence.StateCompleted)
	})

	t.Run("CompletedReplaysTheStoredResponseExactly", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		for key, resp := range map[string]*httpfence.Response{
			"full":  sample,
			"empty": {Status: http.StatusNoContent, Header: http.Header{}, Body: []byte{}},
		} {
			lock := begin(t, s, key, fpA, long)
			require.NoError(t, s.Complete(ctx, key, lock, resp, long))
			for range 2 { // replaying changes nothing
				out, err := s.Begin(ctx, key, fpA, long)
				require.NoError(t, err)
				require.Equal(t, httpfence.StateCompleted, out.State)
				require.Equal(t, resp, out.Response, key)
			}
		}
	})

	t.Run("CompleteAndAbandonNeedTheLock", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		lock := begin(t, s, "k", fpA, long)
		require.ErrorIs(t, s.Complete(ctx, "k", "not-the-lock", sample, long), httpfence.ErrLockLost)
		require.ErrorIs(t, s.Abandon(ctx, "k", "not-the-lock"), httpfence.ErrLockLost)
		require.ErrorIs(t, s.Complete(ctx, "unknown", lock, sample, long), httpfence.ErrLockLost)
		require.ErrorIs(t, s.Abandon(ctx, "unknown", lock), httpfence.ErrLockLost)
		requireState(t, s, "k", fpA, httpfence.StateInFlight)

		require.NoError(t, s.Complete(ctx, "k", lock, sample, long))
		require.ErrorIs(t, s.Complete(ctx, "k", lock, sample, long), httpfence.ErrLockLost, "completed once")
		require.ErrorIs(t, s.Abandon(ctx, "k", lock), httpfence.ErrLockLost, "a completed record is not abandoned")
		requireState(t, s, "k", fpA, httpfence.StateCompleted)
	})

	t.Run("AbandonReleasesTheKey", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		lock := begin(t, s, "k", fpA, long)
		require.NoError(t, s.Abandon(ctx, "k", lock))
		require.ErrorIs(t, s.Abandon(ctx, "k", lock), httpfence.ErrLockLost)
		// Any fingerprint may claim a released key.
		again := begin(t, s, "k", fpB, long)
		require.NotEqual(t, lock, again)
	})

	t.Run("ExpiredLockIsTakenOverAndTheOldLockIsLost", func(t *testing.T) {
		t.Parallel()
		s, advance := newStore(t)
		old := begin(t, s, "k", fpA, short)
		var taken httpfence.Outcome
		eventually(t, "the expired lock is taken over", func() bool {
			advance(short)
			out, err := s.Begin(ctx, "k", fpB, long)
			require.NoError(t, err)
			taken = out
			return out.State == httpfence.StateNew
		})
		require.NotEqual(t, old, taken.Lock)
		require.ErrorIs(t, s.Complete(ctx, "k", old, sample, long), httpfence.ErrLockLost)
		require.ErrorIs(t, s.Abandon(ctx, "k", old), httpfence.ErrLockLost)
		require.NoError(t, s.Complete(ctx, "k", taken.Lock, sample, long))
	})

	t.Run("ExpiredLockWithoutTakeoverCannotComplete", func(t *testing.T) {
		t.Parallel()
		s, advance := newStore(t)
		lock := begin(t, s, "k", fpA, short)
		// A sentinel claimed after k with the same TTL expires after it:
		// once the sentinel can be claimed again, k's lock has expired,
		// and nothing touched k meanwhile.
		begin(t, s, "sentinel", fpA, short)
		eventually(t, "the sentinel expired", func() bool {
			advance(short)
			out, err := s.Begin(ctx, "sentinel", fpA, long)
			require.NoError(t, err)
			return out.State == httpfence.StateNew
		})
		require.ErrorIs(t, s.Complete(ctx, "k", lock, sample, long), httpfence.ErrLockLost)
		begin(t, s, "k", fpA, long)
	})

	t.Run("CompletedRecordExpiresAfterItsTTL", func(t *testing.T) {
		t.Parallel()
		s, advance := newStore(t)
		lock := begin(t, s, "k", fpA, long)
		require.NoError(t, s.Complete(ctx, "k", lock, sample, short))
		eventually(t, "the completed record expired", func() bool {
			advance(short)
			out, err := s.Begin(ctx, "k", fpB, long)
			require.NoError(t, err)
			return out.State == httpfence.StateNew
		})
	})

	t.Run("KeysAreIndependent", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		keys := []string{"a", "A", "a ", "{a}", "}a{", "tenant\x1fkey", "ключ", "settle:2026-03-08T02:00:00Z:eu"}
		locks := map[string]string{}
		for _, k := range keys {
			locks[k] = begin(t, s, k, fpA, long)
		}
		for i, k := range keys {
			resp := &httpfence.Response{Status: 200 + i, Header: http.Header{}, Body: []byte(k)}
			require.NoError(t, s.Complete(ctx, k, locks[k], resp, long))
		}
		for i, k := range keys {
			out, err := s.Begin(ctx, k, fpA, long)
			require.NoError(t, err)
			require.Equal(t, httpfence.StateCompleted, out.State, k)
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
			states = map[httpfence.State]int{}
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
		require.Equal(t, map[httpfence.State]int{httpfence.StateNew: 1, httpfence.StateInFlight: n - 1}, states)
	})

	t.Run("TTLBelowAMillisecondIsRefused", func(t *testing.T) {
		t.Parallel()
		s, _ := newStore(t)
		_, err := s.Begin(ctx, "k", fpA, 0)
		require.Error(t, err)
		lock := begin(t, s, "k", fpA, long)
		require.Error(t, s.Complete(ctx, "k", lock, sample, time.Microsecond))
	})
}

func begin(t *testing.T, s httpfence.Store, key, fp string, ttl time.Duration) string {
	t.Helper()
	out, err := s.Begin(context.Background(), key, fp, ttl)
	require.NoError(t, err)
	require.Equal(t, httpfence.StateNew, out.State, "Begin(%q)", key)
	require.NotEmpty(t, out.Lock)
	return out.Lock
}

func requireState(t *testing.T, s httpfence.Store, key, fp string, want httpfence.State) {
	t.Helper()
	out, err := s.Begin(context.Background(), key, fp, long)
	require.NoError(t, err)
	require.Equal(t, want, out.State, "Begin(%q, %q)", key, fp)
}

// exerciseFence runs the FenceStore contract (the acceptance rule of package
// fence, checked and raised atomically) against fences made by newFence.
func exerciseFence(t *testing.T, newFence func(t *testing.T) httpfence.FenceStore) {
	ctx := context.Background()

	t.Run("AcceptanceRule", func(t *testing.T) {
		t.Parallel()
		f := newFence(t)
		steps := []struct {
			token   fence.Token
			owner   string
			current fence.Token // 0: accepted
		}{
			{5, "a", 0}, // first write
			{5, "a", 0}, // equal token, same owner
			{5, "b", 5}, // equal token, other owner
			{4, "a", 5}, // smaller token
			{6, "b", 0}, // greater token
			{5, "a", 6}, // the old holder, now stale
			{6, "a", 6}, // equal token, the previous owner
			{9, "b", 0}, // greater token, same owner
			{1 << 62, "c", 0},
			{1<<62 - 1, "b", 1 << 62},
		}
		for i, s := range steps {
			err := f.Accept(ctx, "res", fence.Holder{Token: s.token, Owner: s.owner})
			if s.current == 0 {
				require.NoError(t, err, "step %d", i)
				continue
			}
			require.ErrorIs(t, err, fence.ErrStaleToken, "step %d", i)
			var stale *fence.StaleTokenError
			require.ErrorAs(t, err, &stale)
			require.Equal(t, fence.StaleTokenError{Resource: "res", Presented: s.token, Current: s.current}, *stale, "step %d", i)
		}
	})

	t.Run("TokenZeroIsNeverAccepted", func(t *testing.T) {
		t.Parallel()
		f := newFence(t)
		require.ErrorIs(t, f.Accept(ctx, "res", fence.Holder{Token: fence.None, Owner: "a"}), fence.ErrNoToken)
		require.NoError(t, f.Accept(ctx, "res", fence.Holder{Token: 1, Owner: "a"}), "the refused zero left nothing behind")
	})

	t.Run("ResourcesAreIndependent", func(t *testing.T) {
		t.Parallel()
		f := newFence(t)
		for _, r := range []string{"/a", "/A", "/{a}", "/a/", "ресурс"} {
			require.NoError(t, f.Accept(ctx, r, fence.Holder{Token: 10, Owner: "a"}), r)
		}
		require.ErrorIs(t, f.Accept(ctx, "/a", fence.Holder{Token: 9, Owner: "a"}), fence.ErrStaleToken)
		require.NoError(t, f.Accept(ctx, "/b", fence.Holder{Token: 9, Owner: "a"}))
	})

	t.Run("ScopesAreIndependent", func(t *testing.T) {
		t.Parallel()
		f := newFence(t)
		a := fence.Holder{Scope: "settle|tenant-a", Token: 900, Owner: "r1"}
		b := fence.Holder{Scope: "settle|tenant-b", Token: 100, Owner: "r2"}
		require.NoError(t, f.Accept(ctx, "/v1/charges", a))
		require.NoError(t, f.Accept(ctx, "/v1/charges", b), "a smaller token of another lease is not stale")
		require.NoError(t, f.Accept(ctx, "/v1/charges", fence.Holder{Token: 1, Owner: "r3"}), "scope \"\" is a scope of its own")
		// Scope and resource do not run into each other.
		require.NoError(t, f.Accept(ctx, "b:/v1/charges", fence.Holder{Scope: "settle|tenant-", Token: 1, Owner: "r4"}))
		err := f.Accept(ctx, "/v1/charges", fence.Holder{Scope: "settle|tenant-a", Token: 800, Owner: "r5"})
		var stale *fence.StaleTokenError
		require.ErrorAs(t, err, &stale)
		require.Equal(t, fence.StaleTokenError{Resource: "/v1/charges", Scope: "settle|tenant-a", Presented: 800, Current: 900}, *stale)
		require.NoError(t, f.Accept(ctx, "/v1/charges", fence.Holder{Scope: "settle|tenant-b", Token: 101, Owner: "r6"}))
	})

	t.Run("DigitCountDecidesBeforeDigits", func(t *testing.T) {
		t.Parallel()
		f := newFence(t) // "10" > "9" although '1' < '9'
		require.NoError(t, f.Accept(ctx, "res", fence.Holder{Token: 9, Owner: "a"}))
		require.NoError(t, f.Accept(ctx, "res", fence.Holder{Token: 10, Owner: "b"}))
		require.ErrorIs(t, f.Accept(ctx, "res", fence.Holder{Token: 9, Owner: "a"}), fence.ErrStaleToken)
		require.NoError(t, f.Accept(ctx, "res", fence.Holder{Token: 99, Owner: "c"}))
		require.ErrorIs(t, f.Accept(ctx, "res", fence.Holder{Token: 98, Owner: "c"}), fence.ErrStaleToken)
	})

	t.Run("ConcurrentWritersEndAtTheMaximum", func(t *testing.T) {
		t.Parallel()
		f := newFence(t)
		const n = 32
		var (
			wg       sync.WaitGroup
			start    = make(chan struct{})
			mu       sync.Mutex
			accepted []fence.Token
		)
		for i := range n {
			wg.Go(func() {
				<-start
				tok := fence.Token(1000 + i)
				err := f.Accept(ctx, "res", fence.Holder{Token: tok, Owner: "owner"})
				if err == nil {
					mu.Lock()
					accepted = append(accepted, tok)
					mu.Unlock()
				} else if !isStale(err) {
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
		require.Contains(t, accepted, fence.Token(1000+n-1), "nothing beats the largest token")
		err := f.Accept(ctx, "res", fence.Holder{Token: 1000 + n - 2, Owner: "owner"})
		var stale *fence.StaleTokenError
		require.ErrorAs(t, err, &stale)
		require.Equal(t, fence.Token(1000+n-1), stale.Current)
	})
}

func isStale(err error) bool {
	var stale *fence.StaleTokenError
	return err != nil && errors.As(err, &stale)
}
