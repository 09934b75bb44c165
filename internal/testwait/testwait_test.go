package testwait_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdfast-go/holdfast/internal/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPoll(t *testing.T) {
	t.Parallel()
	calls := 0
	require.NoError(t, testwait.Poll(time.Second, time.Millisecond, func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	}))
	require.Equal(t, 3, calls)

	fatal := errors.New("server exited")
	calls = 0
	err := testwait.Poll(time.Minute, time.Millisecond, func() error {
		calls++
		return testwait.Stop(fatal)
	})
	require.Equal(t, fatal, err, "Stop ends the poll at once with its error, unwrapped")
	require.Equal(t, 1, calls)
	require.NoError(t, testwait.Stop(nil))

	last := errors.New("connection refused")
	err = testwait.Poll(20*time.Millisecond, time.Millisecond, func() error { return last })
	require.ErrorIs(t, err, last)
	require.ErrorContains(t, err, "not within 20ms")
}

func TestUntilAndDone(t *testing.T) {
	t.Parallel()
	n := 0
	testwait.Until(t, time.Second, "three polls", func() bool { n++; return n == 3 })
	testwait.UntilEvery(t, time.Second, 100*time.Microsecond, "three more", func() bool { n++; return n == 6 })
	ch := make(chan struct{})
	close(ch)
	testwait.Done(t, ch, time.Second, "a closed channel")
}
