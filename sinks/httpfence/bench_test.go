package httpfence_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/holdfast-go/holdfast/sinks/httpfence"
)

// The middleware's cost per request over a bare handler, by store, called
// through ServeHTTP (no network between client and server; the stores are
// reached over loopback). Each benchmark reports x-bare: its ns/op divided
// by the bare handler's.
//
//	go test -run '^$' -bench Middleware -benchmem ./sinks/httpfence/

var benchHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write([]byte(`{"id":7,"status":"settled"}`))
})

func benchRequest(key string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/settlements/2026-03-08", strings.NewReader(`{"total":1250}`))
	r.Header.Set("Idempotency-Key", key)
	r.Header.Set("Fencing-Token", "1780000000000001")
	r.Header.Set("Fencing-Owner", `"replica-a"`)
	return r
}

// bare holds the bare handler's ns/op for the x-bare ratios: set by the
// bare sub-benchmark, which runs first, or measured on first use when only
// some sub-benchmarks are selected. (testing.Benchmark cannot be called
// from inside a benchmark: it waits for the lock the running one holds.)
var bare struct {
	mu sync.Mutex
	ns float64
}

func bareNsPerOp() float64 {
	bare.mu.Lock()
	defer bare.mu.Unlock()
	if bare.ns == 0 {
		const n = 50_000
		start := time.Now()
		for range n {
			benchHandler.ServeHTTP(httptest.NewRecorder(), benchRequest(`"k"`))
		}
		bare.ns = float64(time.Since(start).Nanoseconds()) / n
	}
	return bare.ns
}

func nsPerOp(b *testing.B) float64 { return float64(b.Elapsed().Nanoseconds()) / float64(b.N) }

func BenchmarkMiddleware(b *testing.B) {
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			benchHandler.ServeHTTP(httptest.NewRecorder(), benchRequest(`"k"`))
		}
		bare.mu.Lock()
		bare.ns = nsPerOp(b) // the last, longest run wins
		bare.mu.Unlock()
		b.ReportMetric(1, "x-bare")
	})
	for _, be := range backends() {
		s := be.new(b)
		mw, err := httpfence.Middleware(httpfence.Options{Store: s.store, Fence: s.fence, AllowUnauthenticatedFencing: true}) // the stores' cost; unsigned requests
		if err != nil {
			b.Fatal(err)
		}
		h := mw(benchHandler)

		// A new key per request: Begin, the fence check, the handler,
		// Complete: three store round trips.
		b.Run(be.name+"/new-key", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, benchRequest(`"new-`+strconv.Itoa(i)+`"`))
				if rec.Code != http.StatusCreated {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
			b.ReportMetric(nsPerOp(b)/bareNsPerOp(), "x-bare")
		})

		// A completed key: Begin returns the stored answer, one round trip.
		b.Run(be.name+"/replay", func(b *testing.B) {
			b.ReportAllocs()
			h.ServeHTTP(httptest.NewRecorder(), benchRequest(`"replayed"`))
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, benchRequest(`"replayed"`))
				if rec.Code != http.StatusCreated {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
			b.ReportMetric(nsPerOp(b)/bareNsPerOp(), "x-bare")
		})
	}
}
