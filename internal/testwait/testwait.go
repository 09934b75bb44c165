// Package testwait waits in tests for something to happen, with a
// deadline: on a channel, or by polling a condition. Never a bare sleep.
package testwait

import (
	"testing"
	"time"
)

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

// Until polls cond every 5 ms until it holds, failing the test after limit.
func Until(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, limit)
		}
		<-tick.C
	}
}
