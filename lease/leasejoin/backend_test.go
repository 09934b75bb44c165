package leasejoin_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/internal/redistest"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/lease/leasedriver"
	"github.com/holdfast-go/holdfast/lease/leasejoin"
	"github.com/holdfast-go/holdfast/lease/leasetest"
	"github.com/holdfast-go/holdfast/lease/redislease"
)

// Backend gives the backend a Client was made on: the one passed to
// NewWithBackend, the *redislease.Backend New builds (with its holder
// label), and nil for a nil or zero Client.
func TestBackendIsTheClientsBackend(t *testing.T) {
	t.Parallel()
	b := leasetest.NewMemoryBackend(clock.Real())
	c, err := lease.NewWithBackend(b, lease.Options{})
	require.NoError(t, err)
	require.Same(t, b, leasejoin.Backend(c))

	rc, err := lease.New(redistest.Mini(t), lease.Options{Holder: "replica-a"})
	require.NoError(t, err)
	rb, ok := leasejoin.Backend(rc).(*redislease.Backend)
	require.True(t, ok, "New's backend is a *redislease.Backend")
	require.Equal(t, "replica-a", leasedriver.Labeled(rb).HolderLabel(), "Options.Holder is stored by the backend")

	require.Nil(t, leasejoin.Backend(nil))
	require.Nil(t, leasejoin.Backend(&lease.Client{}))
}
