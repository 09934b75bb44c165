package scheduler

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/holdfast-go/holdfast/clock"
	"github.com/holdfast-go/holdfast/lease"
	"github.com/holdfast-go/holdfast/scheduler/ledger"
)

// beatLedger answers Heartbeat once release is closed, counting calls and
// sending the times they were asked with on at (none when at is nil).
type beatLedger struct {
	ledger.Ledger
	calls   atomic.Int64
	at      chan time.Time // each call's now
	release chan struct{}
}

func (l *beatLedger) Heartbeat(_ context.Context, _ ledger.Slot, _ ledger.Fence, _ int, now time.Time) error {
	l.calls.Add(1)
	if l.at != nil {
		l.at <- now
	}
	<-l.release
	return nil
}

// A run's heartbeats come every LeaseTTL/3 on the scheduler's clock, from
// a timer, one at a time: a heartbeat that takes longer than the period
// is followed by the next at once, never by two at once; stop waits for
// the one under way, and none comes after it.
func TestHeartbeatTimerRunsOneAtATimeAndStopWaits(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
		fake := clock.NewFake(t0)
		lg := &beatLedger{at: make(chan time.Time, 8), release: make(chan struct{})}
		s := &Scheduler{clock: fake, cfg: Options{Ledger: lg}, log: slog.New(slog.DiscardHandler), trackBeats: true}
		job := &registered{Job: Job{Name: "j", LeaseTTL: 3 * time.Second}} // every 1 s
		stop := s.heartbeat(context.Background(), ledger.Slot{Job: "j", At: t0}, ledger.Fence{}, 1, job, func(error) {})
		require.Len(t, s.beats, 1)

		fake.Advance(999 * time.Millisecond)
		synctest.Wait()
		require.Zero(t, lg.calls.Load(), "a heartbeat before its period")
		fake.Advance(time.Millisecond)
		require.Equal(t, t0.Add(time.Second), <-lg.at)
		require.Equal(t, int64(1), s.active.Load(), "a heartbeat at work counts itself")

		// Blocked for 2.5 periods: no second one meanwhile.
		fake.Advance(2500 * time.Millisecond)
		synctest.Wait()
		require.Equal(t, int64(1), lg.calls.Load(), "two heartbeats at once")
		lg.release <- struct{}{}
		// Overdue: the next comes at once (as a ticker's would).
		require.Equal(t, t0.Add(3500*time.Millisecond), <-lg.at)

		stopped := make(chan struct{})
		go func() {
			defer close(stopped)
			stop()
		}()
		synctest.Wait()
		select {
		case <-stopped:
			t.Fatal("stop returned with a heartbeat under way")
		default:
		}
		close(lg.release)
		<-stopped
		fake.Advance(time.Hour)
		synctest.Wait()
		require.Equal(t, int64(2), lg.calls.Load(), "a heartbeat after stop")
		require.Empty(t, s.beats)
		require.Zero(t, s.active.Load())
		require.Zero(t, fake.Waiters(), "the timer is left armed")
	})
}

// After the run's ctx ended a heartbeat records nothing, arms no timer
// and leaves quiet's list.
func TestHeartbeatEndsWithItsContext(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fake := clock.NewFake(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
		lg := &beatLedger{at: make(chan time.Time, 8), release: make(chan struct{})}
		close(lg.release)
		s := &Scheduler{clock: fake, cfg: Options{Ledger: lg}, log: slog.New(slog.DiscardHandler), trackBeats: true}
		ctx, cancel := context.WithCancel(context.Background())
		stop := s.heartbeat(ctx, ledger.Slot{Job: "j"}, ledger.Fence{}, 1, &registered{Job: Job{LeaseTTL: 3 * time.Second}}, func(error) {})
		cancel()
		fake.Advance(time.Second)
		synctest.Wait()
		require.Zero(t, lg.calls.Load())
		require.Empty(t, s.beats)
		require.Zero(t, fake.Waiters())
		stop()
	})
}

// A heartbeat made while another goroutine moves the clock: its timer may
// fire before AfterFunc has returned, and fire must see the timer.
// Control: with the timer stored outside b.mu (as first written, found by
// review on 2026-12-06) -race reports the store and fire's read of it.
func TestHeartbeatMadeWhileTheClockMoves(t *testing.T) {
	t.Parallel()
	fake := clock.NewFake(time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC))
	lg := &beatLedger{release: make(chan struct{})}
	close(lg.release)
	s := &Scheduler{clock: fake, cfg: Options{Ledger: lg}, log: slog.New(slog.DiscardHandler), trackBeats: true}
	job := &registered{Job: Job{Name: "j", LeaseTTL: 3 * time.Second}}
	done := make(chan struct{})
	moved := make(chan struct{})
	go func() {
		defer close(moved)
		for {
			select {
			case <-done:
				return
			default:
				fake.Advance(time.Second)
			}
		}
	}()
	// 100 rounds, and on until a timer fired (bounded): on a busy host the
	// goroutine that moves the clock may not run for a while (make test
	// beside two busy loops once saw no timer fire in 100 rounds).
	deadline := time.Now().Add(20 * time.Second)
	for round := 0; round < 100 || (lg.calls.Load() == 0 && time.Now().Before(deadline)); round++ {
		var stops []func()
		for range 20 { // stopped later, so that their timers fire meanwhile
			stops = append(stops, s.heartbeat(context.Background(), ledger.Slot{Job: "j"}, ledger.Fence{}, 1, job, func(error) {}))
		}
		for _, stop := range stops {
			stop()
		}
	}
	require.NotZero(t, lg.calls.Load(), "no timer fired: the test tried nothing")
	close(done)
	<-moved
	require.Empty(t, s.beats, "a heartbeat left in quiet's list")
	require.Zero(t, s.active.Load())
}

// A wake-up's claim that keeps finding the lease held backs off from
// wakeRetry to the holder's remaining TTL plus wakeRetry, at most 10 s (a
// review's finding: a replica started during a run of hours polled every
// second; a second one's: with a long TTL, what the wake-up was for would
// wait up to that TTL after the holder let go).
func TestHeldRetryBacksOffToTheRemainingTTL(t *testing.T) {
	short := &lease.NotAcquiredError{Name: "u", RemainingTTL: 5 * time.Second}
	long := &lease.NotAcquiredError{Name: "u", RemainingTTL: 10 * time.Minute}
	var got, gotLong []time.Duration
	for n := 1; n <= 6; n++ {
		got = append(got, heldRetry(n, short))
		gotLong = append(gotLong, heldRetry(n, long))
	}
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 6 * time.Second, 6 * time.Second, 6 * time.Second}, got)
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}, gotLong)
	require.Equal(t, time.Second, heldRetry(1, errors.New("not a NotAcquiredError")))
	require.Equal(t, time.Second, heldRetry(9, &lease.NotAcquiredError{Name: "u"}), "no remaining TTL known")
	require.Equal(t, 10*time.Second, heldRetry(1000, long), "no overflow")
}
