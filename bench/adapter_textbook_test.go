// textbook is the token bucket people write by hand, kept deliberately
// plain: one map[string]*bucket behind one sync.Mutex, float64 tokens, lazy
// refill from time.Now (monotonic clock) on each call, a new key starting
// full. limit maps exactly: rate tokens per second, capacity burst. Keys are
// never evicted.
package bench

import (
	"sync"
	"time"
)

func init() {
	register(impl{
		name:        "textbook",
		keyed:       true,
		tokenBucket: true,
		new: func(lim limit) (limiter, func()) {
			return &textbookLimiter{
				rate:    lim.rate,
				burst:   float64(lim.burst),
				buckets: make(map[string]*textbookBucket),
			}, nil
		},
	})
}

type textbookBucket struct {
	tokens float64
	last   time.Time
}

type textbookLimiter struct {
	rate  float64
	burst float64

	mu      sync.Mutex
	buckets map[string]*textbookBucket
}

func (t *textbookLimiter) allow(key string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()

	now := time.Now()
	b, ok := t.buckets[key]
	if !ok {
		b = &textbookBucket{tokens: t.burst, last: now}
		t.buckets[key] = b
	}

	b.tokens += now.Sub(b.last).Seconds() * t.rate
	if b.tokens > t.burst {
		b.tokens = t.burst
	}
	b.last = now

	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
