package retry_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/holdfast-go/holdfast/internal/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestExponentialGrowsToTheCap(t *testing.T) {
	t.Parallel()
	const s = time.Second
	for _, tc := range []struct {
		attempt   int
		base, max time.Duration
		want      time.Duration
	}{
		{1, s, 5 * time.Minute, s},
		{2, s, 5 * time.Minute, 2 * s},
		{3, s, 5 * time.Minute, 4 * s},
		{9, s, 5 * time.Minute, 256 * s},
		{10, s, 5 * time.Minute, 5 * time.Minute}, // 512 s, capped
		{1 << 30, s, 5 * time.Minute, 5 * time.Minute},
		{0, s, 5 * time.Minute, s},  // attempt below 1 counts as 1
		{-3, s, 5 * time.Minute, s}, // likewise
		{3, 100 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond},
		{2, 100 * time.Millisecond, 300 * time.Millisecond, 200 * time.Millisecond},
		{1, time.Minute, s, s}, // base above the cap
		{5, 0, s, 0},
		{5, s, 0, 0},
		{5, -s, s, 0},
		{80, time.Nanosecond, math.MaxInt64, math.MaxInt64}, // no overflow
		{63, time.Nanosecond, math.MaxInt64, 1 << 62},
	} {
		require.Equal(t, tc.want, retry.Exponential(tc.attempt, tc.base, tc.max),
			"attempt %d, base %v, max %v", tc.attempt, tc.base, tc.max)
	}
}

func TestJitterStaysInItsBounds(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(7, 8)).Int64N
	for _, tc := range []struct {
		d            time.Duration
		below, above float64
		lo, hi       time.Duration
	}{
		{10 * time.Second, 0.2, 0.2, 8 * time.Second, 12 * time.Second},
		{100 * time.Millisecond, 0.5, 0, 50 * time.Millisecond, 100 * time.Millisecond},
		{time.Second, 0, 0, time.Second, time.Second},
		{time.Second, 2, 0, 0, time.Second},             // below clamped to 1
		{time.Second, -1, -1, time.Second, time.Second}, // both clamped to 0
		{3, 0.5, 0, 2, 3},
		{1, 0.5, 0, 1, 1},
		{0, 0.5, 0.5, 0, 0},
		{-time.Second, 0.5, 0.5, -time.Second, -time.Second},
		{math.MaxInt64, 0.2, 0.2, math.MaxInt64 - math.MaxInt64/5 - 1, math.MaxInt64}, // saturates
		{math.MaxInt64, 1, 0, 0, math.MaxInt64},                                       // span+1 overflow guarded
	} {
		seen := map[bool]int{} // draws in the lower and upper halves of the range
		for range 2000 {
			got := retry.Jitter(tc.d, tc.below, tc.above, rnd)
			require.GreaterOrEqual(t, got, tc.lo, "d %v, below %v, above %v", tc.d, tc.below, tc.above)
			require.LessOrEqual(t, got, tc.hi, "d %v, below %v, above %v", tc.d, tc.below, tc.above)
			seen[got-tc.lo > (tc.hi-tc.lo)/2]++
		}
		if tc.hi-tc.lo > 1000 {
			// Spread over the whole range, not stuck at one end: each
			// half gets a fair share of 2000 uniform draws.
			require.Greater(t, seen[false], 800, "d %v: lower half", tc.d)
			require.Greater(t, seen[true], 800, "d %v: upper half", tc.d)
		}
	}
}

func TestJitterUsesTheGlobalSourceWithoutOne(t *testing.T) {
	t.Parallel()
	distinct := map[time.Duration]bool{}
	for range 100 {
		got := retry.Jitter(time.Second, 0.5, 0, nil)
		require.GreaterOrEqual(t, got, 500*time.Millisecond)
		require.LessOrEqual(t, got, time.Second)
		distinct[got] = true
	}
	require.Greater(t, len(distinct), 90, "100 draws from 500 M values are nearly all different")
}

func TestDelayIsDeterministicForASeed(t *testing.T) {
	t.Parallel()
	draw := func(seed uint64) []time.Duration {
		rnd := rand.New(rand.NewPCG(seed, 2)).Int64N
		var out []time.Duration
		for attempt := 1; attempt <= 12; attempt++ {
			out = append(out, retry.Delay(attempt, time.Second, 5*time.Minute, 0.2, 0.2, rnd))
		}
		return out
	}
	a, b := draw(1), draw(1)
	require.Equal(t, a, b, "the same seed gives the same delays")
	require.NotEqual(t, a, draw(3), "another seed gives other delays")
	for i, d := range a {
		want := retry.Exponential(i+1, time.Second, 5*time.Minute)
		require.GreaterOrEqual(t, d, want-want/5, "attempt %d", i+1)
		require.LessOrEqual(t, d, want+want/5, "attempt %d", i+1)
	}
}

// The scheduler's retries: 1 s doubling to a 5 min cap, ±20%, from a
// seeded source.
func ExampleDelay() {
	rnd := rand.New(rand.NewPCG(1, 2)).Int64N
	for attempt := 1; attempt <= 10; attempt += 3 {
		d := retry.Delay(attempt, time.Second, 5*time.Minute, 0.2, 0.2, rnd)
		fmt.Println(attempt, retry.Exponential(attempt, time.Second, 5*time.Minute), d.Round(time.Millisecond))
	}
	// Output:
	// 1 1s 1.108s
	// 4 8s 8.373s
	// 7 1m4s 1m11.281s
	// 10 5m0s 5m35.592s
}
