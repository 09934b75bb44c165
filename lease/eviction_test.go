package lease_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasetest"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

// The eviction-policy check runs before the first acquisition: a Redis
// that may evict keys (maxmemory set, a policy other than noeviction) is
// refused with a message that says what to set, and nothing is written.
func TestEvictionPolicyIsCheckedBeforeTheFirstAcquisition(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		args    []string
		opts    redislease.Eviction
		wantErr error
	}{
		{"AllKeysLRUIsRefused", []string{"--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"}, redislease.Eviction{}, redislease.ErrEvictionPolicy},
		{"VolatileTTLIsRefused", []string{"--maxmemory", "64mb", "--maxmemory-policy", "volatile-ttl"}, redislease.Eviction{}, redislease.ErrEvictionPolicy},
		{"NoEvictionIsAccepted", []string{"--maxmemory", "64mb", "--maxmemory-policy", "noeviction"}, redislease.Eviction{}, nil},
		{"NoMaxMemoryEvictsNothing", []string{"--maxmemory", "0", "--maxmemory-policy", "allkeys-lru"}, redislease.Eviction{}, nil},
		{"AllowEvictionRunsAnyway", []string{"--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"}, redislease.Eviction{AllowEviction: true}, nil},
		{"ConfigRefusedIsUnknown", []string{"--rename-command", "CONFIG", ""}, redislease.Eviction{}, redislease.ErrEvictionPolicyUnknown},
		{"ConfigRefusedDeclaredNoEviction", []string{"--rename-command", "CONFIG", ""}, redislease.Eviction{Policy: "noeviction"}, nil},
		{"ConfigRefusedDeclaredEvicting", []string{"--rename-command", "CONFIG", ""}, redislease.Eviction{Policy: "volatile-lru"}, redislease.ErrEvictionPolicy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redisproc.Start(t, tc.args...)
			rdb := srv.Client(t)
			c, err := lease.New(rdb, lease.Options{Eviction: tc.opts})
			require.NoError(t, err)
			var last error
			for range 2 { // a refusal is not cached away: every try refuses
				l, err := c.TryAcquire(t.Context(), "settle", 5*time.Second)
				if tc.wantErr == nil {
					require.NoError(t, err)
					require.NoError(t, l.Release(t.Context()))
					continue
				}
				require.ErrorIs(t, err, tc.wantErr)
				require.Nil(t, l)
				last = err
				n, derr := rdb.DBSize(t.Context()).Result()
				require.NoError(t, derr)
				require.Zero(t, n, "nothing written on a refused Redis")
			}
			if tc.wantErr == nil {
				return
			}
			_, errs := c.TryAcquireAll(t.Context(), []string{"a", "b"}, 5*time.Second)
			for _, err := range errs {
				require.ErrorIs(t, err, tc.wantErr)
			}
			switch tc.wantErr {
			case redislease.ErrEvictionPolicy:
				require.ErrorContains(t, last, "CONFIG SET maxmemory-policy noeviction")
				require.ErrorContains(t, last, "AllowEviction")
			case redislease.ErrEvictionPolicyUnknown:
				require.ErrorContains(t, last, "lease.Options.Eviction")
				require.ErrorContains(t, last, ".Policy")
			}
		})
	}
}

// A declared policy that is not a Redis policy is refused by New, and
// NewWithBackend refuses the Redis backend's Eviction.
func TestEvictionPolicyDeclaredMustBeARedisPolicy(t *testing.T) {
	t.Parallel()
	srv := redisproc.Start(t)
	_, err := lease.New(srv.Client(t), lease.Options{Eviction: redislease.Eviction{Policy: "no-eviction"}})
	require.ErrorIs(t, err, lease.ErrInvalidOptions)
	_, err = lease.NewWithBackend(leasetest.NewMemoryBackend(nil), lease.Options{Eviction: redislease.Eviction{AllowEviction: true}})
	require.ErrorIs(t, err, lease.ErrInvalidOptions)
}

// With AllowEviction, a held lease whose key Redis evicts is lost at its
// next renewal with a cause that says so (ErrEvicted, and ErrNotHeld), the
// evictions are logged (redis_evictions) and observed, and a competitor
// that then takes the lease gets a higher token.
func TestAllowEvictionReportsAnEvictedLease(t *testing.T) {
	t.Parallel()
	// volatile-ttl evicts only keys with a TTL: the lease key is the only
	// one, so the first eviction is the lease's (Fill's keys have none).
	srv := redisproc.Start(t, "--maxmemory", "4mb", "--maxmemory-policy", "volatile-ttl")
	rdb := srv.Client(t)
	logs := &syncBuffer{}
	obs := &evictionObserver{}
	c, err := lease.New(rdb, lease.Options{
		Eviction: redislease.Eviction{AllowEviction: true},
		Logger:   slog.New(slog.NewTextHandler(logs, nil)),
		Observer: obs,
	})
	require.NoError(t, err)
	l, err := c.TryAcquire(t.Context(), "settle", 3*time.Second)
	require.NoError(t, err)
	leaseKey, _ := lease.KeysOf(c, "settle")

	srv.Fill(t, func() bool { return rdb.Exists(context.Background(), leaseKey).Val() == 0 })
	require.Zero(t, rdb.Exists(t.Context(), leaseKey).Val(), "the lease key was evicted")
	require.Positive(t, srv.EvictedKeys(t))
	srv.Unfill(t)

	testwait.Done(t, l.Done(), 5*time.Second, "the evicted lease is lost at its next renewal")
	require.ErrorIs(t, l.Err(), lease.ErrNotHeld)
	require.ErrorIs(t, l.Err(), lease.ErrEvicted, "the cause says Redis evicted keys")
	require.Positive(t, obs.n.Load(), "evictions observed")
	require.Contains(t, logs.String(), "msg=redis_evictions")
	// lease_lost is logged just after Done closes.
	testwait.Until(t, 5*time.Second, "lease_lost logged with the eviction cause", func() bool {
		return strings.Contains(logs.String(), "Redis evicted keys while the lease was held")
	})

	other, err := c.TryAcquire(t.Context(), "settle", 3*time.Second)
	require.NoError(t, err)
	require.Greater(t, other.Token(), l.Token(), "the fence key has no TTL and was kept")
	require.NoError(t, other.Release(t.Context()))
}

// noeviction with full memory: the acquisition fails with an error that
// says Redis memory is full.
func TestMemoryFullAcquireSaysSo(t *testing.T) {
	t.Parallel()
	srv := redisproc.Start(t, "--maxmemory-policy", "noeviction")
	c, err := lease.New(srv.Client(t), lease.Options{})
	require.NoError(t, err)
	srv.Squeeze(t)
	_, err = c.TryAcquire(t.Context(), "settle", 3*time.Second)
	require.ErrorIs(t, err, redislease.ErrRedisMemoryFull)
	require.ErrorContains(t, err, "redis memory is full")
	require.ErrorContains(t, err, "OOM command not allowed")

	srv.Unfill(t)
	l, err := c.TryAcquire(t.Context(), "settle", 3*time.Second)
	require.NoError(t, err, "freed memory: acquisitions work again")
	require.NoError(t, l.Release(t.Context()))
}

type evictionObserver struct {
	lease.Observer
	n atomic.Int64
}

func (o *evictionObserver) ObserveAcquire(string, error, time.Duration) {}
func (o *evictionObserver) ObserveRenew(string, error, time.Duration)   {}
func (o *evictionObserver) ObserveLoss(string, error)                   {}
func (o *evictionObserver) ObserveEvictions(n int64)                    { o.n.Add(n) }

// syncBuffer is a bytes.Buffer safe for the keeper's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Lease.Renew on a lease whose key was evicted: the lease is lost at once,
// and both the error and the cause name the eviction.
func TestRenewOfAnEvictedLeaseSaysSo(t *testing.T) {
	t.Parallel()
	srv := redisproc.Start(t, "--maxmemory", "4mb", "--maxmemory-policy", "volatile-ttl")
	rdb := srv.Client(t)
	c, err := lease.New(rdb, lease.Options{Eviction: redislease.Eviction{AllowEviction: true}})
	require.NoError(t, err)
	// A long TTL: the keeper does not renew during the test.
	l, err := c.TryAcquire(t.Context(), "settle", time.Minute)
	require.NoError(t, err)
	leaseKey, _ := lease.KeysOf(c, "settle")
	srv.Fill(t, func() bool { return rdb.Exists(context.Background(), leaseKey).Val() == 0 })
	srv.Unfill(t)
	require.NoError(t, l.Err(), "nothing has told the holder yet")

	err = l.Renew(t.Context())
	require.ErrorIs(t, err, lease.ErrNotHeld)
	require.ErrorIs(t, err, lease.ErrEvicted)
	require.ErrorIs(t, l.Err(), lease.ErrEvicted)
	testwait.Done(t, l.Done(), time.Second, "lost at once")
}
