// github.com/ulule/limiter/v3 with drivers/store/memory is a fixed-window
// counter: per key, the first request opens a window of Rate.Period and
// every request in it (refused ones too) increments a counter; a request is
// refused once the counter exceeds Rate.Limit. The next request after the
// window expires opens a new one. Not a token bucket: tokenBucket is false.
//
// Mapping: Limit = lim.burst, Period = lim.burst/lim.rate (rounded to the
// nanosecond, clamped to [1ns, 100 years] so expirations stay representable
// as Unix nanoseconds). A fresh key therefore gets exactly burst requests at
// once and the long-run rate is lim.rate. Approximations: nothing refills
// inside a window (a client that spent its burst waits up to a whole Period,
// not 1/rate), and up to 2*burst can pass in a short span straddling the end
// of one window and the start of the next.
//
// The store is built with CleanUpInterval 0, so no sweeper goroutine ever
// scans the map (the default, 30s, would scan all keys mid-benchmark);
// nothing needs closing. Every call builds "limiter:"+key in a
// strings.Builder, so the allow path allocates (2 allocations per call) even
// for an existing key; the adapter cannot avoid it.
package bench

import (
	"context"
	"time"

	ululelimiter "github.com/ulule/limiter/v3"
	"github.com/ulule/limiter/v3/drivers/store/memory"
)

func init() {
	register(impl{
		name:        "ulule",
		keyed:       true,
		tokenBucket: false,
		new: func(lim limit) (limiter, func()) {
			store := memory.NewStoreWithOptions(ululelimiter.StoreOptions{
				Prefix:          ululelimiter.DefaultPrefix,
				CleanUpInterval: 0,
			})
			rate := ululelimiter.Rate{
				Period: ululePeriod(float64(lim.burst), lim.rate),
				Limit:  int64(lim.burst),
			}
			return ululeLimiter{ululelimiter.New(store, rate)}, nil
		},
	})
}

// ululeMaxPeriod keeps now+Period within the range of Unix nanoseconds.
const ululeMaxPeriod = 100 * 365 * 24 * time.Hour

// ululePeriod is the window in which burst requests are spent at rate per
// second.
func ululePeriod(burst, rate float64) time.Duration {
	return spanOf(burst/rate, ululeMaxPeriod)
}

type ululeLimiter struct{ l *ululelimiter.Limiter }

func (u ululeLimiter) allow(key string) bool {
	ctx, err := u.l.Get(context.Background(), key)
	return err == nil && !ctx.Reached
}
