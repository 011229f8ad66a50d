package engine

import (
	"github.com/faucetgo/faucet/fixedpoint"
	"github.com/faucetgo/faucet/shard"
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
)

// takeKey takes cost quanta (cost <= Capacity; 0 peeks) from key's bucket at
// now, creating the bucket if the key has none. It returns the step, the
// place that holds its result, and for refused the capacity denial.
//
// A take on a bucket whose result lies past its epoch's span replaces the
// bucket by one of a later epoch (moveOn); a bucket found gone (evicted, or
// replaced by another call) is looked up again.
func (e *Engine) takeKey(h uint64, key string, now fixedpoint.Instant, ns int64, cost uint64) (fixedpoint.Step, place, outcome, Decision) {
	l := e.layout
	p := place{b: e.table.Lookup(h, key)}
	overflowed := false
	for {
		if p.b == nil {
			if cost == 0 {
				return fixedpoint.Step{}, p, unstored, Decision{}
			}
			var d Decision
			if p, d = e.create(h, key, now, ns, &overflowed); p.b == nil {
				return fixedpoint.Step{}, p, refused, d
			}
		}
		s, st := p.b.Take(l, now, cost)
		if st == shard.NeedsEpoch {
			s, p, st = e.moveOn(h, key, p, now, cost)
		}
		if st == shard.Done {
			return s, p, taken, Decision{}
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
// still finds p's tombed bucket caught a replacement between its tomb and its
// swap; the lookup is then made again under the mutex that both hold.
func (e *Engine) successor(h uint64, key string, p place) place {
	if p.spill {
		return place{b: e.currentOverflow(), spill: true}
	}
	if b := e.table.Lookup(h, key); b != p.b {
		return place{b: b}
	}
	return place{b: e.table.Current(h, key)}
}

// stateOf returns the state of key's bucket at now, changing nothing; ok is
// false if the key has no bucket (a new one would be full).
func (e *Engine) stateOf(h uint64, key string, now fixedpoint.Instant) (at int64, tokens uint64, ok bool) {
	p := place{b: e.table.Lookup(h, key)}
	for p.b != nil {
		if at, tokens, live := p.b.Peek(e.layout, now); live {
			return at, tokens, true
		}
		p = e.successor(h, key, p) // evicted (full), or replaced
	}
	return 0, 0, false
}

// moveOn makes a take of cost quanta at now on p whose result lies past the
// span of p's bucket's epoch: it replaces the bucket by one of the epoch of
// the result, holding it. It returns the step, the place of the result, and
// Gone if p's bucket was evicted or replaced meanwhile (nothing taken).
//
// Lock-free as to the word: the new state is computed from a loaded word and
// the replacement is a CompareAndSwap of that word to Tomb, under the shard's
// (or overflow bucket's) mutex only for the swap of the pointer.
func (e *Engine) moveOn(h uint64, key string, p place, now fixedpoint.Instant, cost uint64) (fixedpoint.Step, place, shard.Status) {
	l := e.layout
	for {
		w := p.b.Load()
		if w == fixedpoint.Tomb {
			return fixedpoint.Step{}, p, shard.Gone
		}
		s := l.Take(w, p.b.Base(l), now, cost)
		if s.Write() {
			if p.b.CompareAndSwap(w, s.Next) {
				return s, p, shard.Done
			}
			continue
		}
		if !s.NeedsEpoch(cost) {
			return s, p, shard.Done // denied by now
		}
		if nb, ok := e.replace(h, key, p, w, s.At, s.Tokens); ok {
			return s, place{b: nb, spill: p.spill}, shard.Done
		} else if nb != p.b {
			return fixedpoint.Step{}, p, shard.Gone
		}
		// The word changed under us: recompute.
	}
}

// replace replaces p's bucket, whose word is w, by one of the epoch of tick
// holding tokens at tick. It reports false, with the bucket in place now,
// when p's bucket is no longer the key's or its word is no longer w.
func (e *Engine) replace(h uint64, key string, p place, w fixedpoint.Word, tick int64, tokens uint64) (*shard.Bucket, bool) {
	ep, next := e.layout.PackNew(tick, tokens)
	if p.spill {
		return e.replaceOverflow(p.b, w, ep, next)
	}
	return e.table.Replace(h, key, p.b, w, ep, next)
}
