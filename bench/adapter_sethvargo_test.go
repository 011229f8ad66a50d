// github.com/sethvargo/go-limiter (memorystore) is documented as a token
// bucket of Tokens per Interval, but its refill makes it a fixed window: a
// key's windows are Interval long, aligned to the moment the key was first
// seen, and on the first Take of a later window the bucket is set (not added
// to) to min(Tokens, windowsElapsed*Interval/Tokens). Tokens within a window
// are never refilled, so tokenBucket is false.
//
// Mapping: Tokens = lim.burst, Interval = lim.burst/lim.rate (rounded to the
// nanosecond, at least 1ns). That is what a user would write, and gives burst
// per window with the long-run rate equal to lim.rate, when the window
// refill works. It only works when Interval/Tokens >= Tokens, that is when
// rate*burst <= 1e9: the refill multiplies elapsed windows by Interval/Tokens
// (nanoseconds per token, treated as tokens). Otherwise each elapsed window
// gives back only 1e9/rate tokens; e.g. rate 1e9, burst 1e9 (Interval 1s)
// admits the first 1e9 and then one request per second per key. This is the
// library's behaviour and is kept as is.
//
// What cannot be expressed at all: a refill finer than the window (a token
// bucket trickle), burst != rate*Interval (Tokens and the window are tied),
// and fractional bursts. Sweeping uses the defaults (every 6h, entries idle
// 12h), so it never runs during a benchmark. The clock is the wall clock
// (time.now via linkname), not the monotonic one.
package bench

import (
	"context"
	"math"
	"time"

	golimiter "github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"
)

func init() {
	register(impl{
		name:        "sethvargo",
		keyed:       true,
		tokenBucket: false,
		new: func(lim limit) (limiter, func()) {
			tokens := uint64(max(lim.burst, 1))
			s, err := memorystore.New(&memorystore.Config{
				Tokens:   tokens,
				Interval: sethvargoInterval(float64(tokens), lim.rate),
			})
			if err != nil {
				panic(err)
			}
			return sethvargoLimiter{s}, func() { s.Close(context.Background()) }
		},
	})
}

// sethvargoInterval is the window in which tokens tokens are spent at rate
// per second, clamped to what a time.Duration can hold.
func sethvargoInterval(tokens, rate float64) time.Duration {
	ns := math.Round(tokens / rate * 1e9)
	switch {
	case rate <= 0 || !(ns < math.MaxInt64): // no refill, or NaN
		return math.MaxInt64
	case ns < 1:
		return 1
	}
	return time.Duration(ns)
}

type sethvargoLimiter struct{ s golimiter.Store }

func (l sethvargoLimiter) allow(key string) bool {
	_, _, _, ok, err := l.s.Take(context.Background(), key)
	return ok && err == nil
}
