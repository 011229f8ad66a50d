package engine

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/faucetgo/faucet/internal/fixedpoint"
	"github.com/faucetgo/faucet/internal/shard"
)

// Reservation is a take of tokens that may lie in the future: the tokens
// are the holder's from TimeToAct on, and no call, take or reservation, made
// after the reservation can have them. It is safe for concurrent use.
type Reservation struct {
	e  *Engine
	ok bool
	// ns is when the reservation was made; act when its tokens are the
	// holder's (ns if they were there already), both in nanoseconds since
	// the engine's epoch.
	ns, act int64
	// h is the take at act, for CancelAt; h.p.b is nil if nothing was taken.
	h    held
	done atomic.Bool // cancelled
}

// Reserve is ReserveN(time.Now(), key, 1).
func (e *Engine) Reserve(key string) *Reservation {
	return e.ReserveN(time.Now(), key, 1)
}

// ReserveN reserves n tokens of key's bucket at time t: it takes them at the
// first instant from t on at which the bucket holds them, which may be now
// (Delay 0) or later, and returns the reservation. The bucket is decided at
// that instant for every later call, so a later take at an earlier time
// finds the reserved tokens gone and waits behind the reservation, and
// reservations on one key are served in the order they were made.
//
// OK is false, and nothing is taken, if n can never be paid (above Burst,
// negative or NaN), or if the key has no bucket and the table no room for
// one under FullDeny. A reservation counts once in Stats: allowed if OK,
// denied if not.
//
// A holder that acts before TimeToAct, or does not wait at all, defeats the
// limit; WaitN waits, and hands the tokens back if its context ends first.
func (e *Engine) ReserveN(t time.Time, key string, n float64) *Reservation {
	ns := e.nanosAt(t)
	cost, ok := fixedpoint.Quantize(n)
	if !ok {
		cost = fixedpoint.Never // denied as a cost above the burst is
	}
	act, h, res := e.reserveAt(ns, BoundedKey(key), cost, InfDuration)
	return &Reservation{e: e, ns: ns, act: act, h: h, ok: res == reserved}
}

// reserveAt takes cost quanta from key's bucket at the first instant from ns
// on at which it holds them, if that is no more than within after ns, and
// counts the decision. It returns that instant, the take and reserved; or,
// taking nothing, late with the instant the tokens would come, unpayable or
// beyond (act a time that never comes), or noRoom (act ns) for a key that
// finds the table full under FullDeny, with no bucket to wait on.
func (e *Engine) reserveAt(ns int64, key string, cost uint64, within time.Duration) (act int64, h held, res reserveResult) {
	act, h, res, _ = e.reserveDecided(ns, key, cost, within)
	return act, h, res
}

// reserveDecided is reserveAt that also returns the decision of a take
// that finds the tokens there (its Allowed set), for the tokens it leaves.
func (e *Engine) reserveDecided(ns int64, key string, cost uint64, within time.Duration) (act int64, h held, res reserveResult, now Decision) {
	hash := shard.Hash(key)
	for {
		d, h := e.hold(ns, key, cost)
		if d.Allowed {
			e.allowed.add()
			return ns, h, reserved, d
		}
		if d.RetryAfter == InfDuration {
			e.denied.add()
			return neverAfter(ns), held{}, unpayable, Decision{}
		}
		if h.on.b == nil { // refused for a full table, and counted
			return ns, held{}, noRoom, Decision{}
		}
		act, h, res := e.reserveOn(hash, key, h.on, ns, cost, within)
		switch res {
		case reserved:
			e.allowed.add()
			return act, h, res, Decision{}
		case late, unpayable, beyond:
			e.denied.add()
			return act, held{}, res, Decision{}
		}
		// The bucket went, or holds the tokens now: a take at ns again.
	}
}

// reserveResult is how reserveOn ended.
type reserveResult uint8

const (
	reserved  reserveResult = iota // the tokens are taken
	late                           // they come later than the caller waits
	unpayable                      // no bucket can hold them (above the burst)
	beyond                         // they come past the engine's range of time
	noRoom                         // no bucket for the key, none can be made
	again                          // the bucket went, or holds them now
)

// maxAhead bounds the instants reservations are due at, in nanoseconds since
// the epoch: the engine's range of time (±2^62 ns, 146 years). Reservations
// queued on a key past it are refused rather than let the stamp leave it.
const maxAhead = 1 << 62

// reserveOn takes cost quanta, for a reservation made at ns, from the bucket
// at p, which holds fewer: at the first tick that has them, computed from
// the word it swaps (a cancellation may have given tokens back since the
// denial), in one CompareAndSwap. What is left at that tick, less than one
// tick's refill, is dropped (unrefill): a bucket stamped in the future holds
// nothing a caller before the stamp could take. It returns the instant the
// tokens are due and the take.
//
// Lock-free as give is: the word is computed in shard.Bucket.Update, which
// retries on a lost race; a bucket of another epoch or generation is
// replaced under its shard's mutex.
func (e *Engine) reserveOn(hash uint64, key string, p place, ns int64, cost uint64, within time.Duration) (int64, held, reserveResult) {
	for {
		g := e.current()
		l := g.layout
		if cost > l.Capacity() {
			return neverAfter(ns), held{}, unpayable
		}
		var (
			act int64
			res reserveResult // of planNone
		)
		orig, next, ep, pl, live := g.update(p.b, func(w fixedpoint.Word, ep fixedpoint.Epoch) (fixedpoint.Word, fixedpoint.Epoch, plan) {
			base := l.Base(ep)
			_, at, tokens := l.Advance(w, base, l.At(ns))
			if tokens >= cost {
				act, res = 0, again
				return w, ep, planNone
			}
			k := int64(l.TicksUntil(at, tokens, cost))
			if k > l.At(maxAhead).Tick-at {
				act, res = maxAhead, beyond
				return w, ep, planNone
			}
			due := at + k
			if act = l.Nanos(due); time.Duration(act-ns) > within {
				res = late
				return w, ep, planNone
			}
			_, _, have := l.Advance(w, base, fixedpoint.Instant{Tick: due, Ceil: due})
			stamp, left := unrefill(l, due, have-cost, l.CeilTick(ns))
			return g.put(p.b, ep, stamp, left)
		})
		if !live {
			if p = e.successor(hash, key, p); p.b == nil {
				return 0, held{}, again
			}
			continue
		}
		switch pl {
		case planStale:
			continue
		case planNone:
			return act, held{}, res
		}
		h := held{p: p, key: key, atNs: act, ns: act, cost: cost, g: g, ahead: act > ns}
		if pl == planInPlace {
			return act, h, reserved
		}
		nb, ok := e.replace(g, hash, key, p, orig, ep, next)
		if ok {
			h.p = place{b: nb, spill: p.spill}
			return act, h, reserved
		}
		if nb != p.b { // replaced by another call, or evicted
			return 0, held{}, again
		}
	}
}

// neverAfter is the instant InfDuration after ns, saturating: when tokens
// that never come would.
func neverAfter(ns int64) int64 {
	return ns + min(int64(InfDuration), math.MaxInt64-max(ns, 0))
}

// Clone returns a copy of r, for a caller that made r in memory it reuses
// (ReserveWithin) and keeps the reservation longer: the copy is the
// reservation from then on, and r must not be cancelled as well.
func (r *Reservation) Clone() *Reservation {
	c := &Reservation{e: r.e, ok: r.ok, ns: r.ns, act: r.act, h: r.h}
	c.done.Store(r.done.Load())
	return c
}

// OK reports whether the tokens were reserved.
func (r *Reservation) OK() bool { return r.ok }

// TimeToAct returns when the reserved tokens are the holder's; for a
// reservation that is not OK, when they would be (or, if never, a time
// InfDuration after the reservation's).
func (r *Reservation) TimeToAct() time.Time {
	if r.e == nil {
		return time.Time{} // the zero Reservation
	}
	return r.e.epochFor(time.Time{}).Add(time.Duration(r.act))
}

// DelayFrom returns how long after t the holder must wait before acting: 0
// if the tokens are due by t, InfDuration if the reservation is not OK.
func (r *Reservation) DelayFrom(t time.Time) time.Duration {
	if !r.ok {
		return InfDuration
	}
	return since(r.e.nanosAt(t), r.act)
}

// Delay is DelayFrom(time.Now()).
func (r *Reservation) Delay() time.Duration { return r.DelayFrom(time.Now()) }

// Cancel is CancelAt(time.Now()).
func (r *Reservation) Cancel() { r.CancelAt(time.Now()) }

// CancelAt tells the engine, at time t, that the holder will not act on the
// reservation, and gives back to the bucket what no later call has relied
// on: the reserved tokens less the refill due between TimeToAct and the
// latest instant any later call was decided at (a reservation made after
// this one has the tokens it was promised, and keeps its TimeToAct). The
// bucket is then as it would be had the reservation been made for that
// many fewer tokens: a caller at t finds the tokens given back only as the
// refill brings them, never sooner. Nothing is given back once t is past
// TimeToAct (the holder may have acted), for a reservation that is not OK,
// or a second time. A change of limit (SetAt) between the reservation and
// its cancellation is allowed for as in TakeAll's give-back, except for a
// reservation that had to wait: the wait was priced at the old rate, and
// what it is worth at the new one is not known, so nothing is given back
// (the bucket keeps the tokens: it errs towards denying).
func (r *Reservation) CancelAt(t time.Time) {
	if r.ok {
		r.cancelAt(r.e.nanosAt(t))
	}
}

// cancelAt is CancelAt at c, nanoseconds since the epoch.
func (r *Reservation) cancelAt(c int64) {
	if r.h.p.b == nil || r.h.cost == 0 || c > r.act || !r.done.CompareAndSwap(false, true) {
		return
	}
	r.e.giveBack(r.h, max(c, r.ns))
}

// unrefill rewinds a bucket of layout l holding tokens at tick at, where at
// is past tick from: to the state at the earliest tick s in [from, at] from
// which it holds tokens at at by refill alone, the tokens at s being what it
// holds then. A caller at any time before at is decided at at; after the
// rewind, one between s and at is decided at its own time, with the refill
// until then only. If s is still past from, what is left at s (less than
// one tick's refill) is dropped, so that a caller before s finds nothing
// there: the rounding denies. A state that would still be full is left as
// it is (a full bucket's stamp is kept on the refill grid's boundary; it is
// full from s on too, to less than a quantum).
func unrefill(l *fixedpoint.Layout, at int64, tokens uint64, from int64) (int64, uint64) {
	if at <= from {
		return at, tokens
	}
	k := min(uint64(at-from), l.FillTicks())
	if l.Credit(at-int64(k), k) > tokens {
		// The largest k whose refill tokens covers: the credit of the k
		// ticks ending at at grows with k.
		lo, hi := uint64(0), k-1
		for lo < hi {
			mid := lo + (hi-lo+1)/2
			if l.Credit(at-int64(mid), mid) <= tokens {
				lo = mid
			} else {
				hi = mid - 1
			}
		}
		k = lo
	}
	credit := l.Credit(at-int64(k), k)
	if tokens-credit >= l.Capacity() {
		return at, tokens
	}
	if s := at - int64(k); s > from {
		return s, 0
	}
	return at - int64(k), tokens - credit
}
