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

// AfterFunc on the fake: f runs once Advance reaches d (not on a wall
// step), not after Stop, again after Reset, at once for d <= 0; C is nil.
func TestFakeAfterFunc(t *testing.T) {
	t.Parallel()
	f := clock.NewFake(t0)
	calls := make(chan struct{}, 4)
	tm := f.AfterFunc(time.Second, func() { calls <- struct{}{} })
	require.Nil(t, tm.C())
	require.True(t, f.Armed(tm))
	f.Step(time.Hour)
	f.Advance(999 * time.Millisecond)
	require.True(t, f.Armed(tm), "fired before its time")
	f.Advance(time.Millisecond)
	require.False(t, f.Armed(tm))
	<-calls // the call: a test that never sees it times out

	require.False(t, tm.Reset(time.Second), "Reset of a fired timer reported it armed")
	require.True(t, tm.Stop())
	f.Advance(time.Hour)
	select {
	case <-calls:
		t.Fatal("a stopped timer called f")
	default:
	}

	tm.Reset(0)
	<-calls
	require.False(t, f.Armed(tm))
	require.Equal(t, 0, f.Waiters())
}

// AfterFunc on the real clock is time.AfterFunc: inside a synctest bubble,
// f runs when the bubble's time reaches d, on a goroutine of its own.
func TestRealAfterFunc(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := clock.Real()
		start := c.Now()
		at := make(chan time.Time, 1)
		tm := c.AfterFunc(time.Minute, func() { at <- c.Now() })
		require.Nil(t, tm.C())
		synctest.Wait()
		require.Empty(t, at, "f ran before its time")
		require.Equal(t, time.Minute, (<-at).Sub(start))
		require.False(t, tm.Stop(), "Stop of a fired timer reported it armed")
	})
}
