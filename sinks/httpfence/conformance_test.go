package httpfence_test

import (
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore"
	"github.com/holdfast-go/holdfast/sinks/httpfence/idemstore/idemstoretest"
	"github.com/holdfast-go/holdfast/sinks/sinktest"
)

// The conformance suites: every Store and every FenceStore implementation
// meets the same contract (see the Store and FenceStore documentation);
// the FenceStores' is sinktest's, the contract of every fenced sink.

func TestStoreConformance(t *testing.T) {
	t.Parallel()
	for _, b := range append(backends(), pgBackendsAtEveryIsolation()...) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			idemstoretest.Exercise(t, func(t *testing.T) (idemstore.Store, func(time.Duration)) {
				s := b.new(t)
				return s.store, s.advance
			})
		})
	}
}

// TestFenceConformance runs the sink contract (sinktest.Exercise) on every
// FenceStore, through sinktest.FenceSink: the rule case by case, scopes,
// racing holders and a linearizability check of a concurrent history.
func TestFenceConformance(t *testing.T) {
	t.Parallel()
	for _, b := range append(backends(), pgBackendsAtEveryIsolation()...) {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			sinktest.Exercise(t, func(t *testing.T) sinktest.Sink { return sinktest.FenceSink(b.new(t).fence) })
		})
	}
}

const (
	long  = time.Hour             // a TTL no test outlives
	short = 50 * time.Millisecond // a TTL tests wait out by polling
	fpA   = "fingerprint-a"
	fpB   = "fingerprint-b"
)
