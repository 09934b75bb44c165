package lease

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/internal/redistest"
)

// A holder that checks Err before it acts must not act past its trust
// window, even when the keep-alive's timer has not run yet (a starved
// process): Err reads the window itself. The test moves the window into
// the past behind the keep-alive's back, which is what a late timer looks
// like to the holder.
func TestErrReportsTheEndOfTheTrustWindowBeforeTheKeepAliveRuns(t *testing.T) {
	t.Parallel()
	eachBackend(t, func(t *testing.T, s *setup) {
		l := tryAcquire(t, s.client, "late-timer", time.Minute)
		require.NoError(t, l.Err())

		l.mu.Lock()
		l.deadline = time.Now().Add(-time.Millisecond)
		l.mu.Unlock()

		err := l.Err()
		require.ErrorIs(t, err, ErrLost)
		require.ErrorIs(t, err, ErrExpired)
		select {
		case <-l.Done():
		default:
			t.Fatal("Err reported the loss but the lease context is not canceled")
		}
		require.ErrorIs(t, l.Renew(context.Background()), ErrLost, "an ended lease is not renewed")
	})
}

// A frozen holder (leasetest.Freeze) still believes it holds the lease:
// that is what the fault helpers simulate, so Err must not end it.
func TestErrLeavesAFrozenLeaseHeld(t *testing.T) {
	t.Parallel()
	s := newSetup(t, redistest.Backend{Name: "miniredis", New: redistest.Mini})
	l := tryAcquire(t, s.client, "frozen", time.Minute)
	l.mu.Lock()
	l.frozen = true
	l.deadline = time.Now().Add(-time.Millisecond)
	l.mu.Unlock()
	require.NoError(t, l.Err())
}
