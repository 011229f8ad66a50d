// github.com/juju/ratelimit is a token bucket: capacity tokens, starting
// full, refilled by quantum tokens every fillInterval (ticks aligned to the
// bucket's creation). It has no keys, so each key gets its own *Bucket in a
// sync.Map (Load first, so an existing key does not allocate; never evicts).
//
// Mapping: NewBucketWithRate(lim.rate, lim.burst). The library picks the
// smallest quantum whose whole-nanosecond fillInterval gives a rate within
// 1% of lim.rate, so the rate is approximate to 1% (exact for rates like
// 1e9/s or 0.001/s) and refill comes in steps of quantum tokens rather than
// continuously. It panics on capacity <= 0 and cannot express rate <= 0, so
// burst is clamped to at least 1 and rate to at least 1e-9/s (one token per
// ~32 years). The quantum search runs for every new key, on the miss path.
package bench

import (
	"sync"

	"github.com/juju/ratelimit"
)

func init() {
	register(impl{
		name:        "juju",
		keyed:       true,
		tokenBucket: true,
		new: func(lim limit) (limiter, func()) {
			return &jujuLimiter{rate: max(lim.rate, 1e-9), capacity: int64(max(lim.burst, 1))}, nil
		},
	})
}

type jujuLimiter struct {
	rate     float64
	capacity int64
	m        sync.Map // string -> *ratelimit.Bucket
}

func (j *jujuLimiter) allow(key string) bool {
	v, ok := j.m.Load(key)
	if !ok {
		v, _ = j.m.LoadOrStore(key, ratelimit.NewBucketWithRate(j.rate, j.capacity))
	}
	return v.(*ratelimit.Bucket).TakeAvailable(1) == 1
}
