package scheduler_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/fence"
	"github.com/holdfast-go/holdfast/internal/redisproc"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/redislease"
	"github.com/holdfast-go/holdfast/scheduler"
	"github.com/holdfast-go/holdfast/scheduler/ledger/redisledger"
)

// TestStartRefusesAnEvictingRedis is the trial's case: on an allkeys-lru
// Redis lease.New, redisledger.New and scheduler.New succeed (they send
// nothing), and Start returned nil, after which every claim was skipped
// with an error each second and the job never ran. Start now reads the
// policy of the lease backend and of the ledger and fails at once, with
// nothing written; with eviction allowed on both (the control) it starts.
func TestStartRefusesAnEvictingRedis(t *testing.T) {
	t.Parallel()
	srv := redisproc.Start(t, "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")
	rdb := srv.Client(t)
	run := func(context.Context, scheduler.Run) error { return nil }
	allow := redislease.Eviction{AllowEviction: true}

	for _, tc := range []struct {
		name          string
		leases, ledgr redislease.Eviction
		want          error  // nil: Start succeeds
		names         string // the option to change, named by the error
	}{
		{name: "BothRefuse", want: redislease.ErrEvictionPolicy, names: "lease.Options.Eviction"},
		{name: "LeasesRefuse", ledgr: allow, want: redislease.ErrEvictionPolicy, names: "lease.Options.Eviction"},
		{name: "LedgerRefuses", leases: allow, want: redisledger.ErrEvictionPolicy, names: "redisledger.Options.Eviction"},
		{name: "BothAllowed", leases: allow, ledgr: allow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			leases, err := lease.New(rdb, lease.Options{Prefix: "t:" + tc.name + ":lease:", Eviction: tc.leases})
			require.NoError(t, err)
			ldg, err := redisledger.New(rdb, redisledger.Options{Prefix: "t:" + tc.name + ":ledger:", Eviction: tc.ledgr})
			require.NoError(t, err)
			s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ldg})
			require.NoError(t, err)
			require.NoError(t, s.Register(scheduler.Job{Name: "settle", Spec: "* * * * * *", Run: run}))
			err = s.Start(t.Context())
			if tc.want == nil {
				require.NoError(t, err)
				require.NoError(t, s.Stop(context.Background()))
				return
			}
			require.ErrorIs(t, err, tc.want)
			require.ErrorContains(t, err, tc.names)
			require.Zero(t, rdb.DBSize(t.Context()).Val(), "nothing written")
			require.NoError(t, s.Stop(context.Background()), "a Scheduler that did not start stops at once")
		})
	}
}

// Start fails at once, with nothing claimed, when the lease backend or the
// ledger finds another stored format (or another store's marker) under its
// prefix: a fresh user's trial pointed holdfast lease ls at the ledger's
// prefix, which (before reads stopped writing markers) left the lease
// store's marker there; Start returned nil and every claim failed after.
// Real Redis and miniredis.
func TestStartRefusesAnotherStoredFormat(t *testing.T) {
	t.Parallel()
	run := func(context.Context, scheduler.Run) error { return nil }
	for _, b := range redistest.Backends() {
		for _, tc := range []struct {
			name, marked string // which store's marker key holds a foreign marker: "lease" or "ledger"
			store        string // the store whose error names it
		}{
			{"LeaseMarker", "lease", "lease/redislease"},
			{"LedgerMarker", "ledger", "scheduler/ledger/redisledger"},
		} {
			t.Run(b.Name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				rdb := b.New(t)
				prefix := redistest.Prefix(t, rdb)
				foreign := "holdfast some/other/store format 1"
				require.NoError(t, rdb.Set(t.Context(), prefix+tc.marked+":format", foreign, 0).Err())
				leases, err := lease.New(rdb, lease.Options{Prefix: prefix + "lease:"})
				require.NoError(t, err)
				ldg, err := redisledger.New(rdb, redisledger.Options{Prefix: prefix + "ledger:"})
				require.NoError(t, err)
				s, err := scheduler.New(scheduler.Options{Leases: leases, Ledger: ldg})
				require.NoError(t, err)
				require.NoError(t, s.Register(scheduler.Job{Name: "settle", Spec: "* * * * * *", Run: run}))
				err = s.Start(t.Context())
				require.ErrorIs(t, err, fence.ErrUnknownFormat)
				var fe *fence.FormatError
				require.ErrorAs(t, err, &fe)
				require.Equal(t, tc.store, fe.Store)
				require.Equal(t, foreign, fe.Found)
				require.NoError(t, s.Stop(context.Background()), "a Scheduler that did not start stops at once")
			})
		}
	}
}
