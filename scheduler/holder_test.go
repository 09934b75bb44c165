package scheduler

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/testwait"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/leasetest"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
	"github.com/holdfast-go/holdfast/scheduler/ledger/ledgertest"
)

// Options.Holder labels the attempts a replica begins: by default the
// lease client's label, else the host name; set, it wins; an invalid one
// is refused.
func TestHolderLabelOfAttempts(t *testing.T) {
	t.Parallel()
	host, err := os.Hostname()
	require.NoError(t, err)
	backend := leasetest.NewMemoryBackend(nil)
	labelled, err := backend.WithHolder("pod-7")
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		lb     leasedriver.Backend
		holder string
		want   string
	}{
		{"DefaultsToTheHostName", backend, "", host},
		{"DefaultsToTheLeaseClientsLabel", labelled, "", "pod-7"},
		{"SetWins", labelled, "replica-a", "replica-a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			leases, err := lease.NewWithBackend(tc.lb, lease.Options{})
			require.NoError(t, err)
			ldg := ledgertest.NewMemory()
			s, err := New(Options{Leases: leases, Ledger: ldg, Holder: tc.holder})
			require.NoError(t, err)
			require.NoError(t, s.Register(Job{Name: "adhoc-" + tc.name, Spec: yearly, Run: func(context.Context, Run) error { return nil }}))
			require.NoError(t, s.Start(context.Background()))
			t.Cleanup(func() { require.NoError(t, s.Stop(context.Background())) })
			slot, err := s.Trigger(context.Background(), "adhoc-"+tc.name, "", "")
			require.NoError(t, err)
			var rec ledger.Record
			testwait.Until(t, 10*time.Second, "the slot succeeded", func() bool {
				var err error
				rec, _, err = ldg.Get(context.Background(), slot)
				require.NoError(t, err)
				return rec.Status == ledger.StatusSucceeded
			})
			require.Len(t, rec.Attempts, 1)
			require.Equal(t, tc.want, rec.Attempts[0].Holder)
		})
	}
	leases, err := lease.NewWithBackend(backend, lease.Options{})
	require.NoError(t, err)
	for _, bad := range []string{" ", "a\nb", "x\u202ey"} {
		_, err := New(Options{Leases: leases, Ledger: ledgertest.NewMemory(), Holder: bad})
		require.ErrorIs(t, err, ErrInvalidOptions, "%q", bad)
	}
}
