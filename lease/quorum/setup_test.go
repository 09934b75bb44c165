package quorum_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/quorum"
)

func TestMain(m *testing.M) {
	// go-redis logs every failed dial to a killed master; the tests check
	// the errors they return instead.
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m,
		// go-redis probes a master it could not dial once a second, in a
		// goroutine that sees the client closed only after its sleep.
		goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"),
	)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// nodeTimeout bounds every command to one master in these tests, so that
// a killed or paused master costs at most this much per call.
const nodeTimeout = 150 * time.Millisecond

// masters is the per-test bundle: test-owned redis-server processes, a
// client of each with short timeouts, and a key prefix of the test's own.
type masters struct {
	srvs   []*redisproc.Server
	rdbs   []redis.UniversalClient
	prefix string
}

func startMasters(t testing.TB, n int) *masters {
	t.Helper()
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	m := &masters{prefix: "holdfast-quorum:" + hex.EncodeToString(rnd[:]) + ":"}
	for range n {
		srv := redisproc.Start(t)
		m.srvs = append(m.srvs, srv)
		m.rdbs = append(m.rdbs, srv.Client(t, func(o *redis.Options) {
			o.DialTimeout = nodeTimeout
			o.ReadTimeout = nodeTimeout
			o.WriteTimeout = nodeTimeout
			o.PoolTimeout = nodeTimeout
			o.MaxRetries = 1
			o.DialerRetries = 1
		}))
	}
	return m
}

// backend returns a Backend over the masters, under the test's prefix.
func (m *masters) backend(t testing.TB, adjust ...func(*quorum.Options)) *quorum.Backend {
	t.Helper()
	opts := quorum.Options{Prefix: m.prefix}
	for _, f := range adjust {
		f(&opts)
	}
	b, err := quorum.New(m.rdbs, opts)
	require.NoError(t, err)
	return b
}

// client returns a lease Client over a new Backend on the masters.
func (m *masters) client(t testing.TB, adjust ...func(*lease.Options)) (*lease.Client, *quorum.Backend) {
	t.Helper()
	b := m.backend(t)
	var opts lease.Options
	for _, f := range adjust {
		f(&opts)
	}
	c, err := lease.NewWithBackend(b, opts)
	require.NoError(t, err)
	return c, b
}

// held registers l for release when the test ends (Release is idempotent).
func held(t testing.TB, l *lease.Lease) *lease.Lease {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = l.Release(ctx)
	})
	return l
}
