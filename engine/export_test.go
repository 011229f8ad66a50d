package engine

import (
	"time"

	"github.com/faucetgo/faucet/fixedpoint"
	"github.com/faucetgo/faucet/shard"
)

// Held is a take of AllowAll in flight, for tests that interleave other calls
// between a take and its give-back.
type Held = held

// HoldAt makes the take AllowAllAt makes for one part, without counting it.
func (e *Engine) HoldAt(t time.Time, key string, n float64) (Decision, Held) {
	cost, _ := fixedpoint.Quantize(n)
	return e.hold(e.nanosAt(t), BoundedKey(key), cost)
}

// GiveBack gives a held take back, as a denied AllowAllAt does.
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
	return e.take(g, e.nanosAt(t), BoundedKey(key), 0, true)
}

// TokensIn is TokensAt made by a call that loaded g on entry.
func (e *Engine) TokensIn(g Generation, t time.Time, key string) float64 {
	return e.tokensAt(g, e.nanosAt(t), BoundedKey(key))
}
