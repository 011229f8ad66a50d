package failpolicy

import (
	"context"
	"math"
	"sync/atomic"
	"time"
)

// Breaker stops a store from calling its server for a while after
// consecutive failures, so that an outage costs each request nothing rather
// than a deadline. It is safe for concurrent use; the zero value never
// opens.
type Breaker struct {
	after int64         // consecutive failures that open it
	hold  time.Duration // how long it stays open
	// until is the unix nanosecond before which it is open (0: closed);
	// fails counts consecutive failures. Both are read and written
	// without a lock: a race between a failure and a success at most
	// opens the breaker one call late or early.
	until atomic.Int64
	fails atomic.Int64
}

// NewBreaker returns a Breaker that opens for hold after `after`
// consecutive failures; after <= 0 never opens.
func NewBreaker(after int, hold time.Duration) *Breaker {
	b := &Breaker{after: int64(after), hold: hold}
	if after <= 0 {
		b.after = math.MaxInt64
	}
	return b
}

// Open reports whether calls should be answered without the server now.
func (b *Breaker) Open() bool {
	until := b.until.Load()
	return until != 0 && time.Now().UnixNano() < until
}

// Failed counts a failed call and opens the breaker at the threshold.
func (b *Breaker) Failed() {
	if b.after != 0 && b.fails.Add(1) >= b.after {
		b.until.Store(time.Now().Add(b.hold).UnixNano())
	}
}

// Succeeded closes the breaker and clears the count. (Loads first: the
// common case writes nothing, and a shared cache line stays shared.)
func (b *Breaker) Succeeded() {
	if b.fails.Load() != 0 {
		b.fails.Store(0)
	}
	if b.until.Load() != 0 {
		b.until.Store(0)
	}
}

// Observe records the outcome of a call made for caller: a success closes
// the breaker; a failure counts unless caller had already ended, since a
// caller that gave up (a client gone) says nothing about the store, and
// counting it would let a client open the breaker, lifting the limit of
// every key, by aborting its requests.
func (b *Breaker) Observe(caller context.Context, err error) {
	switch {
	case err == nil:
		b.Succeeded()
	case caller.Err() == nil:
		b.Failed()
	}
}
