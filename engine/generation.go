package engine

import (
	"math"
	"sync/atomic"

	"github.com/faucetgo/faucet/internal/fixedpoint"
	"github.com/faucetgo/faucet/internal/shard"
)

// generation is one Limit and Burst the engine has had, and the layout its
// buckets' words are packed in. New makes the first; SetAt makes each next
// one and rewrites every bucket into it before it returns. A bucket carries
// the id of its generation, and a bucket of an earlier one (created by a call
// that raced SetAt) is read through the changes since (lift) and rewritten
// by the first take that touches it.
type generation struct {
	layout *fixedpoint.Layout
	limit  Limit
	burst  float64
	// since is the time the generation took over, in nanoseconds since the
	// engine's epoch; math.MinInt64 for the first.
	since int64
	// id is the generation's number, modulo 65536, as buckets record it. A
	// call reads the generation once and compares ids, so it would misread
	// a bucket only if 65536 changes, each a rewrite of every bucket, ran
	// within that one call.
	id uint16
	// blank is the state of a key without a bucket, of epoch blankEp, until
	// fullAt (nanoseconds since the epoch), from when it is full. The engine
	// behaves as if every key had a bucket, full, from the start: a key
	// never seen and a key whose bucket was evicted (full) are such
	// buckets, and SetAt carries them through a change as it does every
	// other. They are full at every time (fullAt is math.MinInt64) unless
	// a change raised the burst: they then hold the old burst from the
	// change, and refill to the new one at the new rate.
	blank   fixedpoint.Word
	blankEp fixedpoint.Epoch
	fullAt  int64
	// prev is the generation before, whose buckets this one's rewrite
	// replaces: a call of this generation that meets one before its rewrite
	// reads it through lift. Cleared by the next change, so that the chain
	// is never longer than two.
	prev atomic.Pointer[generation]
}

// current returns the generation in force.
func (e *Engine) current() *generation { return e.gen.Load() }

// gens is an Engine seen as the shard.Generations of its table.
type gens Engine

// Current returns the id of the generation in force.
func (g *gens) Current() uint16 { return (*Engine)(g).current().id }

// Fresh returns the generation in force and the word of a new bucket in it.
func (g *gens) Fresh(born, watermark int64) (uint16, fixedpoint.Epoch, fixedpoint.Word) {
	c := (*Engine)(g).current()
	e, w := c.fresh(born, watermark)
	return c.id, e, w
}

// fresh returns the epoch and word of a new bucket of g, created by a call
// whose bucket may be stamped from born, in a shard last evicted at
// watermark (nanoseconds since the epoch): full from the later of the two,
// if a key without a bucket is full by then; otherwise the state of such a
// key, from its own stamp or from the watermark, if later. The change to g
// counts as an update of every key, so no new bucket starts before it.
func (g *generation) fresh(born, watermark int64) (fixedpoint.Epoch, fixedpoint.Word) {
	l := g.layout
	watermark = max(watermark, g.since)
	if max(born, watermark) >= g.fullAt {
		return l.PackNew(l.FullTick(l.At(born).Ceil, l.CeilTick(watermark)), l.Capacity())
	}
	base := l.Base(g.blankEp)
	if stamp := l.Resolve(g.blank, base); watermark <= l.Nanos(stamp) {
		return g.blankEp, g.blank
	}
	_, at, tokens := l.Advance(g.blank, base, l.At(watermark))
	return l.PackNew(at, tokens)
}

// blankAt returns the state at ns of a key without a bucket: its tokens at
// tick at. ns is no earlier than its shard's watermark (blank).
func (g *generation) blankAt(ns int64) (at int64, tokens uint64) {
	l := g.layout
	ns = max(ns, g.since)
	if ns >= g.fullAt {
		return l.At(ns).Tick, l.Capacity()
	}
	_, at, tokens = l.Advance(g.blank, l.Base(g.blankEp), l.At(ns))
	return at, tokens
}

// blank returns the state at ns, in generation g, of key (hashed to h), which
// has no bucket: as of its shard's last eviction if that is later, as a new
// bucket would start (generation.fresh).
func (e *Engine) blank(g *generation, h uint64, ns int64) (at int64, tokens uint64) {
	return g.blankAt(max(ns, e.table.Watermark(h)))
}

// blankTokens is blank's count in tokens: Burst itself when full.
func (e *Engine) blankTokens(g *generation, h uint64, ns int64) float64 {
	if _, tokens := e.blank(g, h, ns); tokens != g.layout.Capacity() {
		return fixedpoint.TokensOf(tokens)
	}
	return g.burst
}

// blankPeek is the Decision of a peek (cost 0) at ns on key (hashed to h),
// which has no bucket.
func (e *Engine) blankPeek(g *generation, h uint64, ns int64) Decision {
	at, tokens := e.blank(g, h, ns)
	d := g.after(at, tokens, 0, ns)
	d.Allowed = true
	return d
}

// setBlank derives g's blank from prev's: a key without a bucket in prev
// carried through the change to g (lift), as every bucket is.
func (g *generation) setBlank(prev *generation) {
	g.fullAt = math.MinInt64
	l, pl := g.layout, prev.layout
	var tokens uint64
	if g.since >= prev.fullAt {
		tokens = min(pl.Capacity(), l.Capacity()) // full in prev at the change
		if tokens == l.Capacity() {
			return
		}
		g.blankEp, g.blank = l.PackNew(l.Boundary(l.At(g.since).Ceil), tokens)
	} else {
		g.blankEp, g.blank = lift(prev, g, prev.blank, prev.blankEp)
		if tokens = l.Tokens(g.blank); tokens == l.Capacity() {
			return
		}
	}
	at := l.Resolve(g.blank, l.Base(g.blankEp))
	g.fullAt = l.Nanos(at + int64(l.TicksUntil(at, tokens, l.Capacity())))
}

// maxLift bounds the changes lift walks through; the rewrites keep the chain
// at two, so a longer one is a generation that g does not know: a bucket of a
// generation newer than g.
const maxLift = 4

// view returns b's state as generation g reads it (read), for a reader that
// changes nothing. live is false if b is gone (evicted or replaced); fresh is
// false if g does not reach b's generation: the caller reads the engine's
// current generation, and b, again.
func (g *generation) view(b *shard.Bucket) (w fixedpoint.Word, ep fixedpoint.Epoch, live, fresh bool) {
	orig, live := b.Word()
	if !live {
		return orig, 0, false, true
	}
	w, ep, fresh = g.read(b, orig)
	return w, ep, true, fresh
}

// read returns orig, a word that b held, as generation g reads it: the word
// itself, and its epoch, for a bucket of g; for a bucket of an earlier
// generation, the word of its state carried through every change since
// (lift), in a fresh epoch, which is also returned. fresh is false if b is
// of a generation that g's chain does not reach: newer than g (g is stale),
// or older than the chain (b was rewritten since orig was read, and its word
// read again is a tomb). Either way the caller reads the engine's current
// generation and b's word again.
func (g *generation) read(b *shard.Bucket, orig fixedpoint.Word) (w fixedpoint.Word, ep fixedpoint.Epoch, fresh bool) {
	if b.Gen() == g.id {
		return orig, b.Epoch(), true
	}
	var chain [maxLift]*generation
	n := 0
	from := g
	for from != nil && from.id != b.Gen() {
		if n == maxLift {
			return orig, 0, false
		}
		chain[n] = from
		n++
		from = from.prev.Load()
	}
	if from == nil {
		return orig, 0, false
	}
	w, ep = orig, b.Epoch()
	for i := n - 1; i >= 0; i-- {
		ep, w = lift(from, chain[i], w, ep)
		from = chain[i]
	}
	return w, ep, true
}

// plan is what a computation in generation.update does with the word it
// arrives at.
type plan uint8

const (
	// planStale: the bucket is of a generation the call's does not reach
	// (read); nothing written. Read the current one, and the word, again.
	planStale plan = iota
	// planNone: nothing to write; the answer was computed from the word.
	planNone
	// planInPlace: the word was written in the bucket.
	planInPlace
	// planReplace: the word needs a new bucket (another epoch or
	// generation); nothing written. Replace the bucket, from the word it
	// was computed from.
	planReplace
)

// update changes b's word by f, in generation g, through shard.Bucket.Update,
// which calls f again on a lost race. f is given the word as g reads it
// (read) and its epoch, and returns the new word, the epoch it is packed in
// and its plan; Update writes it only for planInPlace. A word of a
// generation g does not reach ends the update with planStale, f not called.
// It returns orig, the word b held when f last ran (what a replacement must
// find), f's last answer, and live: false if b is gone, f's answer void.
func (g *generation) update(b *shard.Bucket, f func(w fixedpoint.Word, ep fixedpoint.Epoch) (fixedpoint.Word, fixedpoint.Epoch, plan)) (orig, next fixedpoint.Word, ep fixedpoint.Epoch, pl plan, live bool) {
	orig, live = b.Update(func(orig fixedpoint.Word) (fixedpoint.Word, bool) {
		w, wep, fresh := g.read(b, orig)
		if !fresh {
			pl = planStale
			return orig, false
		}
		next, ep, pl = f(w, wep)
		return next, pl == planInPlace
	})
	return orig, next, ep, pl, live
}

// put returns the word of b's state holding tokens at tick at, in generation
// g, its epoch and its plan: in place, in b's epoch ep, if it fits there and
// b is of g; otherwise in a new bucket of the epoch of at.
func (g *generation) put(b *shard.Bucket, ep fixedpoint.Epoch, at int64, tokens uint64) (fixedpoint.Word, fixedpoint.Epoch, plan) {
	l := g.layout
	if next, fits := l.Pack(l.Base(ep), at, tokens); fits && b.Gen() == g.id {
		return next, ep, planInPlace
	}
	ep, next := l.PackNew(at, tokens)
	return next, ep, planReplace
}

// lift carries a word of generation from, of epoch ep, into generation to,
// which took over at to.since: the bucket's state at that time (or at its own
// last update, if later) at from's rate, capped at to's burst.
//
// It is stamped at the first tick of to's refill grid at or after that time
// that starts a quantum (Boundary), as every full bucket is: the count is
// rounded down to a quantum, and the grid of another rate may stand at any
// fraction of a quantum at that time, which a later take would credit as
// refill the bucket never had. From the boundary on the grid credits no more
// than the exact bucket gains; the cost is at most a quantum's refill and a
// tick's, once per change.
func lift(from, to *generation, w fixedpoint.Word, ep fixedpoint.Epoch) (fixedpoint.Epoch, fixedpoint.Word) {
	l, nl := from.layout, to.layout
	_, at, tokens := l.Advance(w, l.Base(ep), l.At(to.since))
	return nl.PackNew(nl.Boundary(nl.CeilTick(l.Nanos(at))), min(tokens, nl.Capacity()))
}
