package engine

import (
	"math"
	"time"

	"github.com/faucetgo/faucet/internal/fixedpoint"
	"github.com/faucetgo/faucet/internal/shard"
)

// Allow reports whether one token may be taken from key's bucket now, and
// takes it if so. It is AllowN(key, 1).Allowed.
//
// It is the hot path, so it skips what AllowN needs for an arbitrary cost and
// a full Decision: the cost is one token in quanta, and a key that has a live
// bucket is decided by one lookup and one Bucket.Take. Anything else (a new
// key, a bucket evicted or replaced under us, a take past its bucket's epoch)
// goes through take.
func (e *Engine) Allow(key string) bool {
	key = BoundedKey(key)
	h := shard.Hash(key)
	probe := e.table.Prefetch(h)
	ns := e.nanosNow()
	g := e.current()
	if b := probe.Lookup(key); b != nil && b.Gen() == g.id {
		l := g.layout
		if s, st := b.Take(l, l.At(ns), fixedpoint.QuantaPerToken); st == shard.Done {
			e.count(s.Allowed)
			return s.Allowed
		}
	}
	return e.take(g, ns, h, key, 1, false).Allowed
}

// AllowN takes n tokens from key's bucket now if it holds them. Use it for
// weighted requests; n may be fractional (0.001 resolution) and 0 peeks.
func (e *Engine) AllowN(key string, n float64) Decision {
	key = BoundedKey(key)
	h := shard.Hash(key)
	e.table.Prefetch(h)
	ns := e.nanosNow()
	return e.take(e.current(), ns, h, key, n, true)
}

// AllowAt takes n tokens from key's bucket at time t if it holds them.
//
// Any consistent clock works: time.Now(), or a virtual one that starts
// anywhere, such as time.Time{}. A time earlier than the bucket's last update
// counts as that update: it never creates tokens and never moves the bucket
// back. So callers that read the clock before a slow path may pass slightly
// old times safely.
//
// A new key's bucket starts full (after SetAt raised the burst, with what
// every key without a bucket holds: see SetAt). n == 0 peeks: allowed, nothing taken, no
// bucket created. n > Burst, n < 0, NaN and infinities are denied with
// RetryAfter InfDuration and change nothing. A denied call changes nothing
// either, so polling a drained bucket does not delay its refill.
//
// On a key that has a bucket AllowAt takes no lock and allocates nothing.
func (e *Engine) AllowAt(t time.Time, key string, n float64) Decision {
	return e.decide(e.nanosAt(t), key, n)
}

// TokensAt returns the tokens key's bucket holds at time t: for a key
// without a bucket, what a new one would hold (Burst, or less for a while
// after SetAt raised it), unless the table is full (MaxKeys buckets live, none of
// them full by the last eviction scan); then the overflow bucket's tokens
// (FullShare), or 0 (FullDeny). It changes nothing and creates no bucket.
func (e *Engine) TokensAt(t time.Time, key string) float64 {
	return e.tokensAt(e.current(), e.nanosAt(t), BoundedKey(key))
}

// tokensAt is TokensAt at ns for a call that loaded generation g on entry.
func (e *Engine) tokensAt(g *generation, ns int64, key string) float64 {
	h := shard.Hash(key)
	g, _, tokens, ok := e.stateOf(g, h, key, ns)
	if ok {
		return fixedpoint.TokensOf(tokens)
	}
	if e.tableFull(ns) {
		if e.onFull == FullDeny {
			return 0
		}
		if g, _, tokens, ok = e.overflowState(g, ns); ok {
			return fixedpoint.TokensOf(tokens)
		}
	}
	return e.blankTokens(g, h, ns)
}

// decide is AllowAt at ns, nanoseconds since the epoch, for the caller's key.
func (e *Engine) decide(ns int64, key string, n float64) Decision {
	key = BoundedKey(key)
	return e.take(e.current(), ns, shard.Hash(key), key, n, true)
}

// take is the body of every take, on a key BoundedKey has already applied
// to, in generation g. With detail false only Allowed is filled in (Allow
// needs nothing else).
func (e *Engine) take(g *generation, ns int64, h uint64, key string, n float64, detail bool) Decision {
	cost, ok := fixedpoint.Quantize(n)
	if !ok {
		e.denied.add()
		d, _ := e.never(g, h, key, ns)
		return d
	}
	for {
		if cost > g.layout.Capacity() {
			d, in := e.aboveBurst(g, h, key, ns, cost)
			if in == nil {
				e.denied.add()
				return d
			}
			g = in
		}
		var s fixedpoint.Step
		var out outcome
		var d Decision
		g, s, _, out, d = e.takeKey(g, h, key, ns, cost)
		switch out {
		case unstored:
			e.allowed.add()
			return e.blankPeek(g, h, ns)
		case refused:
			return d
		case oversized:
			continue // g is the generation that lowered the burst
		}
		return e.decision(g, s, ns, cost, detail)
	}
}

// aboveBurst decides a call whose cost is above generation g's burst: denied
// (the Decision, uncounted, and nil), unless a change of limit raced the call
// and key's bucket is of a newer generation whose burst is large enough; it
// then returns that generation, in which the call is decided again.
func (e *Engine) aboveBurst(g *generation, h uint64, key string, ns int64, cost uint64) (Decision, *generation) {
	d, in := e.never(g, h, key, ns)
	if in == g || cost > in.layout.Capacity() {
		return d, nil
	}
	return Decision{}, in
}

// decision turns a fixedpoint step of generation g into a Decision and counts
// it.
func (e *Engine) decision(g *generation, s fixedpoint.Step, ns int64, cost uint64, detail bool) Decision {
	e.count(s.Allowed)
	d := Decision{Allowed: s.Allowed}
	if detail {
		d.Remaining = fixedpoint.TokensOf(s.Tokens)
		if !s.Allowed {
			d.RetryAfter = g.wait(s.At, s.Tokens, cost, ns)
		}
		d.ResetAfter = g.wait(s.At, s.Tokens, g.layout.Capacity(), ns)
	}
	return d
}

// count counts one decision.
func (e *Engine) count(allowed bool) {
	if allowed {
		e.allowed.add()
	} else {
		e.denied.add()
	}
}

// wait returns the time from ns until a bucket of generation g holding have
// quanta at tick at holds need quanta: to the start of the first tick that
// has them.
func (g *generation) wait(at int64, have, need uint64, ns int64) time.Duration {
	if have >= need {
		return 0
	}
	l := g.layout
	k := l.TicksUntil(at, have, need)
	return since(ns, l.Nanos(at+int64(k)))
}

// since returns the wait from ns until the instant until (both in ns since
// the epoch), at least 0. ns is clamped to ±2^62 first, as every time is; a
// wait from there to a bucket stamped near +2^62 does not fit a Duration and
// saturates just short of InfDuration, which means never.
func since(ns, until int64) time.Duration {
	from := fixedpoint.ClampNanos(ns)
	if from < 0 && until > math.MaxInt64+from {
		return InfDuration - 1
	}
	return max(0, time.Duration(until-from))
}

// never is the decision, uncounted, for a cost that no bucket can ever pay,
// reporting key's state as generation g reads it, or a newer one if key's
// bucket is of a newer one (a change of limit raced the call): it returns
// the generation the report is in.
func (e *Engine) never(g *generation, h uint64, key string, ns int64) (Decision, *generation) {
	g, at, tokens, ok := e.stateOf(g, h, key, ns)
	if !ok {
		at, tokens = e.blank(g, h, ns)
	}
	return g.after(at, tokens, fixedpoint.Never, ns), g
}
