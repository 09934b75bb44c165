package retry

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v5"
)

// Exponential returns base * 2^(attempt-1), at most max: base for attempt
// 1 (or less), 2*base for attempt 2, and so on until the cap. A base above
// max gives max; a base or max of 0 or less gives 0. The growth is
// cenkalti/backoff's ExponentialBackOff with Multiplier 2 and no
// randomization, stepped attempt times from a fresh value (at most until it
// reaches max, so a large attempt costs no more than about
// log2(max/base) steps).
func Exponential(attempt int, base, max time.Duration) time.Duration {
	if base <= 0 || max <= 0 {
		return 0
	}
	b := &backoff.ExponentialBackOff{InitialInterval: base, Multiplier: 2, MaxInterval: max}
	d := b.NextBackOff()
	for i := 1; i < attempt && d < max; i++ {
		d = b.NextBackOff()
	}
	return min(d, max)
}

// Jitter returns a uniform draw from [d - d*below, d + d*above] (whole
// nanoseconds, both ends included): below 0.5 and above 0 draw from
// [d/2, d]; 0.2 and 0.2 from d ± 20%. below is clamped to [0, 1] and above
// to 0 or more; the upper end saturates at the largest Duration. d of 0 or
// less is returned as is. rnd(n) must return a uniform value in [0, n),
// as math/rand/v2's Rand.Int64N does; nil uses the global source
// (rand.Int64N), which cannot be seeded.
func Jitter(d time.Duration, below, above float64, rnd func(n int64) int64) time.Duration {
	if d <= 0 {
		return d
	}
	below = min(max(below, 0), 1)
	above = max(above, 0)
	lo, hi := time.Duration(0), d
	if down := float64(d) * below; down < float64(d) {
		lo = d - time.Duration(down)
	}
	if up := float64(d) * above; up >= float64(math.MaxInt64-d) {
		hi = math.MaxInt64
	} else {
		hi += time.Duration(up)
	}
	span := int64(hi - lo)
	if span <= 0 {
		return lo
	}
	if rnd == nil {
		rnd = rand.Int64N
	}
	if span == math.MaxInt64 { // span+1 would overflow
		return lo + time.Duration(rnd(span))
	}
	return lo + time.Duration(rnd(span+1))
}

// Delay is Jitter(Exponential(attempt, base, max), below, above, rnd): the
// wait after attempt (1-based) of a capped, jittered exponential backoff.
// With above > 0 a draw may exceed max by up to max*above (the cap bounds
// the interval, not the jitter, as in cenkalti/backoff).
func Delay(attempt int, base, max time.Duration, below, above float64, rnd func(n int64) int64) time.Duration {
	return Jitter(Exponential(attempt, base, max), below, above, rnd)
}
