// github.com/throttled/throttled/v2 is GCRA (the generic cell rate
// algorithm): per key it stores one theoretical arrival time and admits a
// request if it is no more than the delay variation tolerance ahead of now.
// It behaves like a token bucket with continuous refill but is not coded as
// one, so tokenBucket is false. Keys live in store/memstore, the in-memory
// store, created unbounded (memstore.NewCtx(0): a plain map under an
// RWMutex, no LRU, never evicts), so 1e6 keys fit.
//
// Mapping:
//   - rate: RateQuota.MaxRate is an emission interval, one request per
//     period. PerSec/PerMin take whole counts, so fractional rates are
//     expressed as PerDuration(1, period) with period = 1s/lim.rate rounded
//     to the nanosecond and clamped to [1ns, max Duration]. The rate is
//     therefore 1e9/round(1e9/lim.rate) per second: exact for rates whose
//     period is a whole number of ns, off by up to 0.5ns per period
//     otherwise (e.g. 3e8/s becomes 3.33e8/s), and at most 1e9/s.
//   - burst: the limiter admits MaxBurst+1 requests at once from a fresh or
//     idle key (limit = MaxBurst+1, tolerance = period*(MaxBurst+1)), so
//     MaxBurst = lim.burst-1. burst 0 cannot be expressed (MaxBurst >= 0, so
//     at least 1).
//   - The store keeps now+period*(MaxBurst+1) as Unix nanoseconds, which
//     overflow after 2262, so period and period*burst are clamped to 100
//     years (only matters for rates below ~3e-10/s or absurd bursts).
//
// RateLimitCtx gives up with an error after 10 failed compare-and-swaps on
// a contended key; allow then refuses (fails closed).
package bench

import (
	"context"
	"time"

	"github.com/throttled/throttled/v2"
	"github.com/throttled/throttled/v2/store/memstore"
)

func init() {
	register(impl{
		name:        "throttled",
		keyed:       true,
		tokenBucket: false,
		new: func(lim limit) (limiter, func()) {
			st, err := memstore.NewCtx(0)
			if err != nil {
				panic(err)
			}
			period := throttledPeriod(lim.rate)
			capacity := int64(max(lim.burst, 1))
			if most := int64(throttledMaxTolerance / period); capacity > most {
				capacity = most
			}
			rl, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{
				MaxRate:  throttled.PerDuration(1, period),
				MaxBurst: int(capacity - 1),
			})
			if err != nil {
				panic(err)
			}
			return throttledLimiter{rl}, nil
		},
	})
}

// throttledMaxTolerance bounds period*(MaxBurst+1) so that the arrival
// times the store keeps stay representable as Unix nanoseconds.
const throttledMaxTolerance = 100 * 365 * 24 * time.Hour

// throttledPeriod is the emission interval for rate per second.
func throttledPeriod(rate float64) time.Duration {
	return spanOf(1/rate, throttledMaxTolerance)
}

type throttledLimiter struct{ rl *throttled.GCRARateLimiterCtx }

func (l throttledLimiter) allow(key string) bool {
	limited, _, err := l.rl.RateLimitCtx(context.Background(), key, 1)
	return err == nil && !limited
}
