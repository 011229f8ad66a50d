package engine

import (
	"fmt"
	"math"
	"time"

	"github.com/faucetgo/faucet/internal/fixedpoint"
	"github.com/faucetgo/faucet/internal/shard"
)

// heldOnStack is how many takes TakeAll tracks without allocating.
const heldOnStack = 8

// TakeAllAt takes takes[i].N tokens from every takes[i].Key's bucket at time
// t, or from none. It fills out[i] for every take and returns the index of the
// take that was denied, or -1 when all were taken. Every takes[i].Limiter must
// be a non-nil *Engine or Multi of Engines (else ErrNilLimiter or
// ErrForeignTake) and out must hold at least len(takes) decisions (else
// ErrShortOut); on an error nothing is taken and out is untouched. The
// receiver only names the implementation and may be any Engine, or nil.
//
// A take naming a Multi stands for a take of each of its parts on its key,
// made in the parts' order where it stands; out[i] folds the parts'
// Decisions into one (see Multi), and the denied index is the take's.
//
// When all are taken, out[i] is what AllowAt would have returned for take i.
// When take k is denied, no out[i].Allowed is true and nothing is consumed
// from any bucket: out[i].Remaining is what bucket i holds afterwards,
// out[i].RetryAfter the wait until take i alone would be allowed (0 if its
// bucket holds enough now, InfDuration if it never can), and out[k].RetryAfter
// is positive. A take that can never be satisfied (N above its engine's Burst,
// negative or NaN) is found before anything is taken, and the first such take
// is the one reported, whatever its position. Otherwise takes are made in
// order, and the first denial gives back the takes before it, in reverse
// order. Every take counts once in its engine's Stats: as allowed if the call
// was allowed, as denied otherwise.
//
// # Guarantee under concurrency
//
// The takes are separate CompareAndSwaps on separate buckets, not one atomic
// step. While TakeAllAt runs, another caller may find a bucket short of the
// tokens it took and is about to give back, and be denied: as if that
// caller had come just after a TakeAllAt that was allowed. Giving back never
// lifts a bucket above its Burst, and never returns refill twice: it returns
// the tokens taken less any refill the bucket received between the take and
// the give-back, because a bucket left alone might have lost that refill at
// its cap. So afterwards a bucket holds at most what it would hold had the
// call never been made (for the same decisions of every other caller), and
// exactly that when no caller with a later time touched it in between; with
// callers on one clock the shortfall is at most the refill of the time the
// call took. No bucket ever admits more than one whose takes were never made.
//
// TakeAllAt allocates nothing for up to 8 takes, each Multi counted as its
// parts, on keys that have buckets.
func (e *Engine) TakeAllAt(t time.Time, takes []Take, out []Decision) (int, error) {
	return takeAll(t, true, takes, out)
}

// held is one take of a TakeAll in flight: what to give back if a later
// take is denied.
type held struct {
	// p is where the tokens were taken from (the key's bucket, or the
	// overflow bucket); p.b is nil if nothing was taken (a peek, a denial).
	p place
	// key is the take's key, as BoundedKey stores it.
	key string
	// atNs is the time the take stored, in nanoseconds since the epoch
	// (its tick, in whatever generation gives it back); ns the time of the
	// decision.
	atNs, ns int64
	cost     uint64
	// g is the generation the take was made in.
	g *generation
	// counted is set on a denial that was already counted in Stats (by the
	// capacity path of FullDeny).
	counted bool
	// on is, for a denial by a bucket, that bucket: where a reservation
	// waits for its tokens.
	on place
	// ahead is set on a reservation that waits: its take moved the
	// bucket's stamp past the decision, pricing the time between at g's
	// rate, so only g can give it back (see giveBack).
	ahead bool
}

// engineOf is the Engine of a take that checkTakes accepted.
func engineOf(tk *Take) *Engine {
	e, _ := tk.Limiter.(*Engine)
	return e
}

// checkTakes refuses the calls of TakeAll that are programming errors, and
// reports whether a take names a Multi of Engines, and whether one names a
// Quota or a Window.
func checkTakes(takes []Take, out []Decision) (multis, locals bool, err error) {
	if len(out) < len(takes) {
		return false, false, fmt.Errorf("%w: %d takes, %d decisions", ErrShortOut, len(takes), len(out))
	}
	for i := range takes {
		e, ok := takes[i].Limiter.(*Engine)
		if ok && e != nil {
			continue
		}
		switch l := takes[i].Limiter.(type) {
		case *Quota:
			if l == nil {
				return false, false, fmt.Errorf("%w: takes[%d]", ErrNilLimiter, i)
			}
			locals = true
			continue
		case *Window:
			if l == nil {
				return false, false, fmt.Errorf("%w: takes[%d]", ErrNilLimiter, i)
			}
			locals = true
			continue
		}
		m, isMulti := multiOf(takes[i].Limiter)
		switch {
		case takes[i].Limiter == nil || ok || isMulti && m == nil:
			return false, false, fmt.Errorf("%w: takes[%d]", ErrNilLimiter, i)
		case isMulti && m.engines:
			multis = true
		case isMulti:
			return false, false, fmt.Errorf("%w: takes[%d] is a Multi of %T, not of *engine.Engine", ErrForeignTake, i, m.parts[0])
		default:
			return false, false, fmt.Errorf("%w: takes[%d] is a %T, not an *engine.Engine, *engine.Quota or *engine.Window", ErrForeignTake, i, takes[i].Limiter)
		}
	}
	return multis, locals, nil
}

func takeAll(t time.Time, explicit bool, takes []Take, out []Decision) (int, error) {
	multis, locals, err := checkTakes(takes, out)
	if err != nil {
		return -1, err
	}
	if multis {
		return takeExpanded(t, explicit, takes, out, locals), nil
	}
	if locals {
		return takeWithLocals(t, explicit, takes, out), nil
	}
	return takeEngines(t, explicit, takes, out), nil
}

// takeEngines is TakeAllAt of takes that checkTakes accepted, each on an
// *Engine.
func takeEngines(t time.Time, explicit bool, takes []Take, out []Decision) int {
	// A cost no bucket can pay denies before anything is taken.
	for i := range takes {
		e := engineOf(&takes[i])
		if cost, ok := fixedpoint.Quantize(takes[i].N); !ok || cost > e.current().layout.Capacity() {
			fillDenied(t, explicit, takes, out, nil, i, false)
			return i
		}
	}
	var stack [heldOnStack]held
	hs := stack[:0]
	if len(takes) > heldOnStack {
		hs = make([]held, 0, len(takes))
	}
	for i := range takes {
		tk := &takes[i]
		e := engineOf(tk)
		cost, _ := fixedpoint.Quantize(tk.N)
		d, h := e.hold(e.nanosFor(t, explicit), BoundedKey(tk.Key), cost)
		out[i] = d
		if !d.Allowed {
			if !h.counted {
				e.denied.add()
			}
			fillDenied(t, explicit, takes, out, hs, i, true)
			return i
		}
		hs = append(hs, h)
	}
	for i := range takes {
		engineOf(&takes[i]).allowed.add()
	}
	return -1
}

// fillDenied completes a denial at index k: it gives back the takes in hs
// (those before k, in reverse order), fills out for every take but k when
// kDone (k was denied by its bucket, which filled and counted it) and counts
// every other take as denied.
func fillDenied(t time.Time, explicit bool, takes []Take, out []Decision, hs []held, k int, kDone bool) {
	for i := len(hs) - 1; i >= 0; i-- {
		e, h := engineOf(&takes[i]), hs[i]
		e.denied.add()
		if h.p.b != nil {
			out[i] = e.give(h)
		} else {
			out[i] = e.peek(h.ns, h.key, h.cost)
		}
	}
	for i := len(hs); i < len(takes); i++ {
		if kDone && i == k {
			continue
		}
		e := engineOf(&takes[i])
		e.denied.add()
		cost, ok := fixedpoint.Quantize(takes[i].N)
		if !ok || cost > e.current().layout.Capacity() {
			cost = fixedpoint.Never
		}
		out[i] = e.peek(e.nanosFor(t, explicit), BoundedKey(takes[i].Key), cost)
	}
}

// nanosFor is t in the engine's nanoseconds, or its clock's now.
func (e *Engine) nanosFor(t time.Time, explicit bool) int64 {
	if explicit {
		return e.nanosAt(t)
	}
	return e.nanosNow()
}

// hold takes cost quanta from key's bucket at ns, as AllowAt does, but counts
// nothing and returns what giving the tokens back needs. key is bounded
// (BoundedKey), as for peek.
func (e *Engine) hold(ns int64, key string, cost uint64) (Decision, held) {
	h := shard.Hash(key)
	g := e.current()
	var s fixedpoint.Step
	var p place
	var out outcome
	var d Decision
	for {
		// TakeAll checked cost against the burst; a change of limit may
		// have lowered it since, as for take.
		if cost > g.layout.Capacity() {
			d, in := e.aboveBurst(g, h, key, ns, cost)
			if in == nil {
				return d, held{key: key, ns: ns, cost: fixedpoint.Never}
			}
			g = in
		}
		if g, s, p, out, d = e.takeKey(g, h, key, ns, cost); out != oversized {
			break
		}
	}
	switch {
	case out == unstored:
		return e.blankPeek(g, h, ns), held{key: key, ns: ns}
	case out == refused:
		return d, held{key: key, ns: ns, cost: cost, counted: true}
	case !s.Allowed:
		return g.after(s.At, s.Tokens, cost, ns), held{key: key, ns: ns, cost: cost, on: p}
	}
	l := g.layout
	d = Decision{
		Allowed:    true,
		Remaining:  fixedpoint.TokensOf(s.Tokens),
		ResetAfter: g.wait(s.At, s.Tokens, l.Capacity(), ns),
	}
	if cost == 0 {
		return d, held{key: key, ns: ns}
	}
	return d, held{p: p, key: key, atNs: l.Nanos(s.At), ns: ns, cost: cost, g: g}
}

// refillSince bounds from above the refill a bucket of generation g received
// from a take at tick took (at takeNs) until tick at, the take made in
// generation from. In one generation it is the exact credit. Across a change
// (SetAt between the take and its give-back) the refill came at the old rate
// and then at the new, so the larger of the two over the whole interval
// bounds it; across more than one change the bound is unknown, and it
// returns the whole capacity: nothing is given back.
func (g *generation) refillSince(from *generation, takeNs, took, at int64) uint64 {
	l := g.layout
	credit := l.Credit(took, min(uint64(at-took), l.FillTicks()))
	switch from {
	case g:
		return credit
	case g.prev.Load():
		fl := from.layout
		ft, fat := fl.CeilTick(takeNs), fl.CeilTick(l.Nanos(at))
		if fat > ft {
			credit = max(credit, fl.Credit(ft, min(uint64(fat-ft), fl.FillTicks())))
		}
		return credit
	}
	return max(l.Capacity(), from.layout.Capacity())
}

// give returns the cost quanta of h to its bucket, at the instant of the take,
// less the refill the bucket received since the take, and reports the
// bucket's state as a denied Decision.
//
// Why less the refill: had the take never been made, the bucket could have
// reached its cap while later callers refilled it, and the refill beyond the
// cap would have been lost. Each such update loses at most the refill it
// credits, so the bucket untouched by the take holds at least what it holds
// now plus cost minus the refill since the take; returning that much can
// never lift it above what it would hold without the take. When nothing with a
// later time touched the bucket the refill is 0 and the take is undone
// exactly.
//
// Lock-free like shard.Bucket.Take: the new word is computed in
// shard.Bucket.Update, which retries on a lost race. A bucket replaced by one
// of a later epoch or generation is followed to its successor. An evicted
// bucket was full, and so is whatever the key has now unless takes since
// drained it, each of which found the refill since the take at least h.cost
// (the bucket was full after the take): nothing is due. Across a change of
// limit (SetAt) the refill since the take is bounded by the faster of the two
// rates (refillSince).
func (e *Engine) give(h held) Decision {
	return e.giveBack(h, math.MaxInt64)
}

// giveBack is give, for a take that moved its bucket's stamp to a later
// instant than from (a reservation, taken at the instant its tokens are
// due): the state given back is rewound toward from (unrefill), so that a
// caller before the take's instant finds the tokens only as the refill
// brings them. Left at the take's instant, they would be there at once: a
// take, its cancellation and another take, all at one instant, would admit
// the tokens twice.
func (e *Engine) giveBack(h held, from int64) Decision {
	p := h.p
	hash := shard.Hash(h.key)
	for {
		g := e.current()
		l := g.layout
		now := l.At(h.ns)
		var (
			at     int64
			tokens uint64
		)
		orig, next, ep, pl, live := g.update(p.b, func(w fixedpoint.Word, ep fixedpoint.Epoch) (fixedpoint.Word, fixedpoint.Epoch, plan) {
			_, at, tokens = l.Advance(w, l.Base(ep), now)
			if h.ahead && h.g != g {
				// The tokens a waiting reservation took are refill it
				// priced at its generation's rate, up to its TimeToAct;
				// at another rate that time holds another amount, which
				// the word no longer tells: nothing is given back, as
				// across two changes in refillSince.
				return w, ep, planNone
			}
			took := l.CeilTick(h.atNs) // the take's tick, in g's units
			back := min(h.cost, l.Capacity())
			if at > took {
				back -= min(back, g.refillSince(h.g, h.atNs, took, at))
			}
			if back == 0 || tokens == l.Capacity() {
				return w, ep, planNone
			}
			tokens = min(tokens+back, l.Capacity())
			if tokens == l.Capacity() && at > took {
				// Filled by refill credited since the take: stored at the
				// next quantum boundary, as every full bucket is, so that
				// the grid's fraction is not credited again. (At the take's
				// tick itself the bucket was full before the take, and that
				// tick is already the boundary.)
				at = l.Boundary(max(at, now.Ceil))
			}
			if from != math.MaxInt64 {
				at, tokens = unrefill(l, at, tokens, l.CeilTick(from))
			}
			return g.put(p.b, ep, at, tokens)
		})
		if !live {
			if p = e.successor(hash, h.key, p); p.b == nil {
				return e.peek(h.ns, h.key, h.cost)
			}
			continue
		}
		switch pl {
		case planStale:
			continue
		case planNone, planInPlace:
			return g.after(at, tokens, h.cost, h.ns)
		}
		if nb, ok := e.replace(g, hash, h.key, p, orig, ep, next); ok {
			return g.after(at, tokens, h.cost, h.ns)
		} else if nb != p.b {
			// Replaced by another call (nb), or evicted (nb nil): follow
			// it as a bucket found gone.
			if p = e.successor(hash, h.key, p); p.b == nil {
				return e.peek(h.ns, h.key, h.cost)
			}
		}
	}
}

// peek reports, without changing anything, key's bucket at ns as a denied
// Decision for a take of cost quanta (fixedpoint.Never: never satisfiable).
func (e *Engine) peek(ns int64, key string, cost uint64) Decision {
	h := shard.Hash(key)
	g, at, tokens, ok := e.stateOf(e.current(), h, key, ns)
	if ok {
		return g.after(at, tokens, cost, ns)
	}
	if cost <= g.layout.Capacity() && e.tableFull(ns) {
		if e.onFull == FullDeny {
			return Decision{RetryAfter: e.capacityWait(ns)}
		}
		if g, at, tokens, ok := e.overflowState(g, ns); ok {
			return g.after(at, tokens, cost, ns)
		}
	}
	// No bucket: what a new one would hold.
	at, tokens = e.blank(g, h, ns)
	return g.after(at, tokens, cost, ns)
}

// after is the denied Decision of a bucket of generation g holding tokens
// quanta at tick at, for a take of cost quanta.
func (g *generation) after(at int64, tokens, cost uint64, ns int64) Decision {
	l := g.layout
	d := Decision{
		Remaining:  fixedpoint.TokensOf(tokens),
		ResetAfter: g.wait(at, tokens, l.Capacity(), ns),
	}
	if cost > l.Capacity() {
		d.RetryAfter = InfDuration
	} else {
		d.RetryAfter = g.wait(at, tokens, cost, ns)
	}
	return d
}
