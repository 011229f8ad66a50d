// go.uber.org/ratelimit is a leaky-bucket pacer, not a token bucket
// (tokenBucket false): Take never refuses, it sleeps until the next
// permission is due, spacing calls perRequest apart; "slack" lets calls
// that fell behind catch up. It has no keys (keyed false) and its only call
// blocks (blocking true), so the harness uses it only where the limit never
// binds, to price the bookkeeping; allow calls Take and always returns true.
//
// Mapping: ratelimit.New(rate int, Per(d)) sets perRequest = d/rate in whole
// nanoseconds. New(int(lim.rate)) would truncate fractional rates (and
// rates below 1/s to 0, a division by zero), so the adapter passes rate 1
// with Per(1s/lim.rate) instead: perRequest = 1s/lim.rate rounded to the
// nanosecond and clamped to [1ns, 100 years], the same value New(n) computes
// for integer n. Rates above 1e9/s become 1e9/s (New(n) would truncate
// perRequest to 0, which disables pacing).
//
// Burst: after an idle spell the limiter lets slack+1 calls through without
// sleeping, so WithSlack(lim.burst-1) (at least 0, and slack*perRequest
// clamped to 100 years). Unlike a full bucket, a brand-new limiter admits
// only one call before pacing starts; that cannot be expressed.
package bench

import (
	"time"

	"go.uber.org/ratelimit"
)

func init() {
	register(impl{
		name:        "uber",
		keyed:       false,
		blocking:    true,
		tokenBucket: false,
		new: func(lim limit) (limiter, func()) {
			per := uberPerRequest(lim.rate)
			slack := int64(max(lim.burst-1, 0))
			if most := int64(uberMaxSpan / per); slack > most {
				slack = most
			}
			return uberLimiter{ratelimit.New(1, ratelimit.Per(per), ratelimit.WithSlack(int(slack)))}, nil
		},
	})
}

// uberMaxSpan bounds perRequest and slack*perRequest, both nanosecond
// offsets added to Unix nanoseconds.
const uberMaxSpan = 100 * 365 * 24 * time.Hour

// uberPerRequest is the pacing interval for rate per second.
func uberPerRequest(rate float64) time.Duration {
	return spanOf(1/rate, uberMaxSpan)
}

type uberLimiter struct{ l ratelimit.Limiter }

func (u uberLimiter) allow(string) bool {
	u.l.Take()
	return true
}
