// golang.org/x/time/rate is a token bucket: rate.Limit tokens per second
// refill a bucket of burst tokens that starts full. limit maps onto it
// exactly: rate.Limit(lim.rate), burst lim.burst.
//
// The library has no notion of keys, so it appears three times:
//   - xtime: one shared *rate.Limiter, key ignored (keyed=false); the
//     reference point for the cost of the bucket arithmetic alone.
//   - xtime_syncmap: one *rate.Limiter per key in a sync.Map, the way most
//     code keys it.
//   - xtime_xsyncmap: the same with github.com/puzpuzpuz/xsync/v3 MapOf.
//
// Both keyed variants Load first, so an existing key costs no allocation;
// only a miss builds a limiter. Neither ever evicts keys.
package bench

import (
	"sync"

	"github.com/puzpuzpuz/xsync/v3"
	"golang.org/x/time/rate"
)

func init() {
	register(impl{
		name:        "xtime",
		keyed:       false,
		tokenBucket: true,
		new: func(lim limit) (limiter, func()) {
			return xtimeLimiter{rate.NewLimiter(rate.Limit(lim.rate), lim.burst)}, nil
		},
	})
	register(impl{
		name:        "xtime_syncmap",
		keyed:       true,
		tokenBucket: true,
		new: func(lim limit) (limiter, func()) {
			return &xtimeSyncMap{lim: lim}, nil
		},
	})
	register(impl{
		name:        "xtime_xsyncmap",
		keyed:       true,
		tokenBucket: true,
		new: func(lim limit) (limiter, func()) {
			return &xtimeXsyncMap{lim: lim, m: xsync.NewMapOf[string, *rate.Limiter]()}, nil
		},
	})
}

type xtimeLimiter struct{ l *rate.Limiter }

func (x xtimeLimiter) allow(string) bool { return x.l.Allow() }

type xtimeSyncMap struct {
	lim limit
	m   sync.Map // string -> *rate.Limiter
}

func (x *xtimeSyncMap) allow(key string) bool {
	v, ok := x.m.Load(key)
	if !ok {
		v, _ = x.m.LoadOrStore(key, rate.NewLimiter(rate.Limit(x.lim.rate), x.lim.burst))
	}
	return v.(*rate.Limiter).Allow()
}

type xtimeXsyncMap struct {
	lim limit
	m   *xsync.MapOf[string, *rate.Limiter]
}

func (x *xtimeXsyncMap) allow(key string) bool {
	l, ok := x.m.Load(key)
	if !ok {
		l, _ = x.m.LoadOrCompute(key, func() *rate.Limiter {
			return rate.NewLimiter(rate.Limit(x.lim.rate), x.lim.burst)
		})
	}
	return l.Allow()
}
