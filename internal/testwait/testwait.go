package testwait

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// Interval is how often Until polls (5 ms).
const Interval = 5 * time.Millisecond

// Done waits for ch to close, failing the test after limit.
func Done(t testing.TB, ch <-chan struct{}, limit time.Duration, what string) {
	t.Helper()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		t.Fatalf("%s: not within %v", what, limit)
	}
}

// Until polls cond every Interval until it holds, failing the test after
// limit. cond runs on the test's goroutine, so it may call require.
func Until(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	UntilEvery(t, limit, Interval, what, cond)
}

// UntilEvery is Until polling every interval: shorter for a fake-time
// rig that settles in microseconds, longer for a condition that costs a
// round trip to a server under failover.
func UntilEvery(t testing.TB, limit, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	err := Poll(limit, interval, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
	if err != nil {
		t.Fatalf("%s: not within %v", what, limit)
	}
}

var errNotYet = errors.New("not yet")

// Poll calls check every interval until it returns nil, returns an error
// made by Stop, or limit passes. It returns nil, Stop's error, or the
// last error of check wrapped with the limit. It is the form for helpers
// that report a wait that failed (with logs, or by trying something else)
// instead of failing the test.
func Poll(limit, interval time.Duration, check func() error) error {
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		err := check()
		if err == nil {
			return nil
		}
		var s stopped
		if errors.As(err, &s) {
			return s.err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v: %w", limit, err)
		}
		<-tick.C
	}
}

// Stop makes Poll return err at once, unwrapped; Stop(nil) is nil.
func Stop(err error) error {
	if err == nil {
		return nil
	}
	return stopped{err}
}

// stopped marks an error that ends a Poll at once.
type stopped struct{ err error }

func (s stopped) Error() string { return s.err.Error() }
func (s stopped) Unwrap() error { return s.err }
