package engine

import (
	"github.com/faucetgo/faucet/internal/fixedpoint"
	"github.com/faucetgo/faucet/internal/shard"
)

// place is the bucket a call's tokens are taken from: the key's own, or the
// engine's overflow bucket (FullShare), which lives outside the table.
type place struct {
	b     *shard.Bucket
	spill bool
}

// outcome is how takeKey ended.
type outcome uint8

const (
	// taken: the step stands; its tokens (if allowed) are in p.
	taken outcome = iota
	// unstored: a peek on a key without a bucket; a new one would be full.
	unstored
	// refused: the table is full and FullDeny denied the key; the decision
	// is the capacity denial, counted already.
	refused
	// oversized: SetAt lowered Burst below the cost while the call ran;
	// nothing was taken, and no bucket can ever pay it.
	oversized
)

// takeKey takes cost quanta (cost <= Capacity of g; 0 peeks) from key's
// bucket at now (in g's ticks), creating the bucket if the key has none. It
// returns the step, the place that holds its result, and for refused the
// capacity denial.
//
// A take on a bucket whose result lies past its epoch's span, or on a bucket
// of an earlier generation, replaces the bucket (rewrite); a bucket found
// gone (evicted, or replaced by another call) is looked up again. g is the
// generation the call decides in; a bucket of a newer one (SetAt raced the
// call) is decided in that one, which the call then reports in: it returns
// the generation the step is in.
func (e *Engine) takeKey(g *generation, h uint64, key string, ns int64, cost uint64) (*generation, fixedpoint.Step, place, outcome, Decision) {
	p := place{b: e.table.Lookup(h, key)}
	overflowed := false
	for {
		now := g.layout.At(ns)
		if p.b == nil {
			if cost == 0 {
				// No bucket reads as the blank of the generation current
				// at the lookup: a SetAt after g was loaded may have let a
				// sweep evict the key at the new burst.
				if c := e.current(); c != g {
					g, p = c, place{b: e.table.Lookup(h, key)}
					continue
				}
				return g, fixedpoint.Step{}, p, unstored, Decision{}
			}
			var d Decision
			if p, d = e.create(g, h, key, now, ns, &overflowed); p.b == nil {
				return g, fixedpoint.Step{}, p, refused, d
			}
		}
		var s fixedpoint.Step
		st := shard.NeedsEpoch
		if p.b.Gen() == g.id {
			s, st = p.b.Take(g.layout, now, cost)
		}
		if st == shard.NeedsEpoch {
			var stale bool
			if s, p, st, stale = e.rewrite(g, h, key, p, now, cost); stale {
				if g = e.current(); cost > g.layout.Capacity() {
					return g, fixedpoint.Step{}, p, oversized, Decision{}
				}
				continue
			}
		}
		if st == shard.Done {
			return g, s, p, taken, Decision{}
		}
		p = e.again(h, key, p)
	}
}

// again returns where a take looks after p's bucket was found gone: the
// key's bucket in the table now (nil if none), or nothing after the overflow
// bucket (create hands out its successor, or a bucket of the key's own if
// room has freed up).
func (e *Engine) again(h uint64, key string, p place) place {
	if p.spill {
		return place{}
	}
	return e.successor(h, key, p)
}

// successor returns what holds key's tokens after p's bucket was found gone:
// the key's bucket in the table now, or the overflow bucket now; p.b is nil
// if there is none (the bucket was evicted full). A lock-free lookup that
// still finds p's tombed bucket caught a replacement or a rebuild between its
// tomb and the new bucket's publication, or the key was evicted; the lookup
// is then made again under the mutex that both hold.
func (e *Engine) successor(h uint64, key string, p place) place {
	if p.spill {
		return place{b: e.currentOverflow(), spill: true}
	}
	if b := e.table.Lookup(h, key); b != p.b {
		return place{b: b}
	}
	return place{b: e.table.Current(h, key)}
}

// stateOf returns the state of key's bucket at ns in generation g, changing
// nothing; ok is false if the key has no bucket (a new one would be full).
// It returns the generation the state is in (a newer one if SetAt raced);
// with ok false, the one current when the lookup found no bucket, whose
// blank is what the key holds.
func (e *Engine) stateOf(g *generation, h uint64, key string, ns int64) (_ *generation, at int64, tokens uint64, ok bool) {
	p := place{b: e.table.Lookup(h, key)}
	for {
		if p.b == nil {
			if c := e.current(); c != g {
				g, p = c, place{b: e.table.Lookup(h, key)}
				continue
			}
			return g, 0, 0, false
		}
		w, ep, live, fresh := g.view(p.b)
		if !fresh {
			g = e.current()
			continue
		}
		if live {
			l := g.layout
			_, at, tokens = l.Advance(w, l.Base(ep), l.At(ns))
			return g, at, tokens, true
		}
		p = e.successor(h, key, p) // evicted (full), or replaced
	}
}

// rewrite makes a take of cost quanta at now on p that cannot be written in
// place: its result lies past the span of its bucket's epoch, or its bucket
// is of an earlier generation than g. It replaces the bucket by one of g, of
// the epoch of the result, holding it (a denial or a peek on a bucket of an
// earlier generation writes the state lifted into g). It returns the step,
// the place of the result, and Gone if p's bucket was evicted or replaced
// meanwhile (nothing taken); stale if the bucket is of a generation newer
// than g.
//
// Lock-free as to the word: the new state is computed in shard.Bucket.Update,
// which writes it in place if it fits there, and the replacement tombs the
// word it was computed from (shard.Bucket.Tomb), under the shard's (or
// overflow bucket's) mutex only to publish the new bucket.
func (e *Engine) rewrite(g *generation, h uint64, key string, p place, now fixedpoint.Instant, cost uint64) (s fixedpoint.Step, _ place, _ shard.Status, stale bool) {
	l := g.layout
	for {
		orig, next, ep, pl, live := g.update(p.b, func(w fixedpoint.Word, ep fixedpoint.Epoch) (fixedpoint.Word, fixedpoint.Epoch, plan) {
			inPlace := p.b.Gen() == g.id
			s = l.Take(w, l.Base(ep), now, cost)
			switch {
			case s.Write() && inPlace:
				return s.Next, ep, planInPlace
			case s.NeedsEpoch(cost):
				ep, next := l.PackNew(s.At, s.Tokens)
				return next, ep, planReplace
			case !s.Write() && inPlace:
				return w, ep, planNone // denied, or a peek: nothing to write
			case !s.Write():
				return w, ep, planReplace // the lifted state, taken or not
			default: // taken from a bucket of an earlier generation
				return s.Next, ep, planReplace
			}
		})
		switch {
		case !live:
			return s, p, shard.Gone, false
		case pl == planStale:
			return s, p, shard.Gone, true
		case pl != planReplace:
			return s, p, shard.Done, false
		}
		if nb, ok := e.replace(g, h, key, p, orig, ep, next); ok {
			return s, place{b: nb, spill: p.spill}, shard.Done, false
		} else if nb != p.b {
			return s, p, shard.Gone, false
		}
		if e.current() != g {
			return s, p, shard.Gone, true // SetAt came between
		}
		// The word changed under us: compute again.
	}
}

// replace replaces p's bucket, whose word is w, by one of generation g and
// epoch ep holding next. It reports false, with the bucket in place now, when
// p's bucket is no longer the key's or its word is no longer w.
func (e *Engine) replace(g *generation, h uint64, key string, p place, w fixedpoint.Word, ep fixedpoint.Epoch, next fixedpoint.Word) (*shard.Bucket, bool) {
	if p.spill {
		return e.replaceOverflow(p.b, w, g.id, ep, next)
	}
	return e.table.Replace(h, key, p.b, w, (*gens)(e), g.id, ep, next)
}
