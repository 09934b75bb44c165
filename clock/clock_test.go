package clock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdfast-go/holdfast/clock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func fired(tm clock.Timer) (time.Time, bool) {
	select {
	case at := <-tm.C():
		return at, true
	default:
		return time.Time{}, false
	}
}

func TestFakeTimerFiresOnAdvanceNotOnStep(t *testing.T) {
	t.Parallel()
	f := clock.NewFake(t0)
	tm := f.NewTimer(time.Second)
	f.Step(time.Hour) // the wall clock jumps; no elapsed time passed
	_, ok := fired(tm)
	require.False(t, ok, "a wall-clock step fired a timer")
	f.Advance(999 * time.Millisecond)
	_, ok = fired(tm)
	require.False(t, ok)
	f.Advance(time.Millisecond)
	at, ok := fired(tm)
	require.True(t, ok)
	require.Equal(t, t0.Add(time.Hour+time.Second), at)
	require.Equal(t, 0, f.Waiters())
}

func TestFakeAdvanceFiresLateTimersWithTheFinalTime(t *testing.T) {
	t.Parallel()
	f := clock.NewFake(t0)
	a, b := f.NewTimer(time.Second), f.NewTimer(3*time.Second)
	f.Advance(8 * time.Second) // a frozen process resumes
	atA, okA := fired(a)
	atB, okB := fired(b)
	require.True(t, okA && okB)
	require.Equal(t, t0.Add(8*time.Second), atA)
	require.Equal(t, atA, atB)
}

func TestFakeStopAndResetDropAStaleValue(t *testing.T) {
	t.Parallel()
	f := clock.NewFake(t0)
	tm := f.NewTimer(time.Second)
	f.Advance(time.Second)
	require.False(t, tm.Reset(time.Second), "a fired timer is not armed")
	_, ok := fired(tm)
	require.False(t, ok, "Reset left the old value")
	require.True(t, tm.Stop())
	require.False(t, tm.Stop())
	require.Equal(t, 0, f.Waiters())
}

func TestFakeBlockUntil(t *testing.T) {
	t.Parallel()
	f := clock.NewFake(t0)
	done := make(chan struct{})
	go func() {
		defer close(done)
		clock.Sleep(f, time.Minute, nil)
	}()
	require.NoError(t, f.BlockUntil(context.Background(), 1))
	f.Advance(time.Minute)
	<-done
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, f.BlockUntil(ctx, 1), context.Canceled)
}

func TestRealFollowsSynctest(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := clock.Real()
		start := c.Now()
		require.True(t, clock.Sleep(c, time.Hour, nil))
		require.Equal(t, time.Hour, c.Now().Sub(start))
	})
}
