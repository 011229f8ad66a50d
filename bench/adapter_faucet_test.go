package bench

import (
	"time"

	"github.com/faucetgo/faucet/engine"
)

func init() {
	register(impl{
		name:        "faucet",
		keyed:       true,
		tokenBucket: true,
		new: func(lim limit) (limiter, func()) {
			e, err := engine.New(engine.Config{
				Limit:         engine.Limit(lim.rate),
				Burst:         float64(lim.burst),
				SweepInterval: sweepOrNone(lim.sweep),
			})
			if err != nil {
				panic(err)
			}
			return faucetLimiter{e}, func() { e.Close() }
		},
	})
}

type faucetLimiter struct{ e *engine.Engine }

func (f faucetLimiter) allow(key string) bool { return f.e.Allow(key) }

// sweepOrNone turns faucet's sweeper off unless a benchmark asks for it: a
// sweeper would evict refilled buckets during a run, and the scenarios mean to
// time calls on existing keys (the peers' cleanups are off or hours apart by
// default too). BenchmarkTail and the sweeper benchmarks run it.
func sweepOrNone(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
