package engine

import (
	"context"
	"time"

	"github.com/faucetgo/faucet/internal/fixedpoint"
	"github.com/faucetgo/faucet/internal/shard"
)

// Fold is the Decision of a Multi whose parts decided ds.
var Fold = fold

// Held is a take of TakeAll in flight, for tests that interleave other calls
// between a take and its give-back.
type Held = held

// HoldAt makes the take TakeAllAt makes for one part, without counting it.
func (e *Engine) HoldAt(t time.Time, key string, n float64) (Decision, Held) {
	cost, _ := fixedpoint.Quantize(n)
	return e.hold(e.nanosAt(t), BoundedKey(key), cost)
}

// GiveBack gives a held take back, as a denied TakeAllAt does.
// A held peek has no bucket and nothing to give back.
func (e *Engine) GiveBack(h Held) Decision {
	if h.p.b == nil {
		return e.peek(h.ns, h.key, h.cost)
	}
	return e.give(h)
}

// HoldReservation counts one live bucket that is not in the table yet, as a
// new key does between reserving room under MaxKeys and inserting its
// bucket; release gives the room back.
func HoldReservation(e *Engine) (release func()) {
	e.live.Add(1)
	return func() { e.live.Add(-1) }
}

// CreateAt creates key's bucket as a call at t does before its take, and
// takes nothing: a test can then land another call on the new bucket first.
func (e *Engine) CreateAt(t time.Time, key string) {
	ns := e.nanosAt(t)
	key = BoundedKey(key)
	var overflowed bool
	g := e.current()
	e.create(g, shard.Hash(key), key, g.layout.At(ns), ns, &overflowed)
}

// Generation is the limit a call loads on entry, for tests that make a call
// in one a change of limit has since replaced, as a call preempted between
// that load and its lookup of the key does.
type Generation = *generation

// Generation returns the limit in force.
func (e *Engine) Generation() Generation { return e.current() }

// PeekIn is AllowAt(t, key, 0) made by a call that loaded g on entry.
func (e *Engine) PeekIn(g Generation, t time.Time, key string) Decision {
	key = BoundedKey(key)
	return e.take(g, e.nanosAt(t), shard.Hash(key), key, 0, true)
}

// TokensIn is TokensAt made by a call that loaded g on entry.
func (e *Engine) TokensIn(g Generation, t time.Time, key string) float64 {
	return e.tokensAt(g, e.nanosAt(t), BoundedKey(key))
}

// VirtualClock runs WaitN on virtual time: Now is the time it reads; each
// wait is recorded in Slept and moves Now on by its length, unless Interrupt
// is set, when the wait moves Now on by half its length and returns
// Interrupt, as a context that ends while WaitN waits does.
type VirtualClock struct {
	Now       time.Time
	Slept     []time.Duration
	Interrupt error
}

// WaitNOn is WaitN on c. ctx's deadline is read as a time of c.
func (e *Engine) WaitNOn(ctx context.Context, key string, n float64, c *VirtualClock) error {
	return e.waitN(ctx, key, n, waitClock{
		now:   func() int64 { return e.nanosAt(c.Now) },
		until: func(dl time.Time) time.Duration { return dl.Sub(c.Now) },
		sleep: func(_ context.Context, d time.Duration) error {
			c.Slept = append(c.Slept, d)
			if c.Interrupt != nil {
				c.Now = c.Now.Add(d / 2)
				return c.Interrupt
			}
			c.Now = c.Now.Add(d)
			return nil
		},
	})
}
