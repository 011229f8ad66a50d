package engine

import (
	"math"
	"time"

	"github.com/faucetgo/faucet/fixedpoint"
	"github.com/faucetgo/faucet/shard"
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
	ns := e.nanosNow()
	if b := e.table.Lookup(shard.Hash(key), key); b != nil {
		l := e.layout
		if s, st := b.Take(l, l.At(ns), fixedpoint.QuantaPerToken); st == shard.Done {
			e.count(s.Allowed)
			return s.Allowed
		}
	}
	return e.take(ns, key, 1, false).Allowed
}

// AllowN takes n tokens from key's bucket now if it holds them. Use it for
// weighted requests; n may be fractional (0.001 resolution) and 0 peeks.
func (e *Engine) AllowN(key string, n float64) Decision {
	return e.decide(e.nanosNow(), key, n)
}

// AllowAt takes n tokens from key's bucket at time t if it holds them.
//
// Any consistent clock works: time.Now(), or a virtual one that starts
// anywhere, such as time.Time{}. A time earlier than the bucket's last update
// counts as that update: it never creates tokens and never moves the bucket
// back. So callers that read the clock before a slow path may pass slightly
// old times safely.
//
// A new key's bucket starts full. n == 0 peeks: allowed, nothing taken, no
// bucket created. n > Burst, n < 0, NaN and infinities are denied with
// RetryAfter InfDuration and change nothing. A denied call changes nothing
// either, so polling a drained bucket does not delay its refill.
//
// On a key that has a bucket AllowAt takes no lock and allocates nothing.
func (e *Engine) AllowAt(t time.Time, key string, n float64) Decision {
	return e.decide(e.nanosAt(t), key, n)
}

// TokensAt returns the tokens key's bucket holds at time t: Burst for a key
// without a bucket, unless the table is full (MaxKeys buckets live, none of
// them full by the last eviction scan); then the overflow bucket's tokens
// (FullShare), or 0 (FullDeny). It changes nothing and creates no bucket.
func (e *Engine) TokensAt(t time.Time, key string) float64 {
	l := e.layout
	now := l.At(e.nanosAt(t))
	key = BoundedKey(key)
	if _, tokens, ok := e.stateOf(shard.Hash(key), key, now); ok {
		return fixedpoint.TokensOf(tokens)
	}
	if e.tableFull(now) {
		if e.onFull == FullDeny {
			return 0
		}
		if _, tokens, ok := e.overflowState(now); ok {
			return fixedpoint.TokensOf(tokens)
		}
	}
	return e.burst
}

// decide is AllowAt at ns, nanoseconds since the epoch, for the caller's key.
func (e *Engine) decide(ns int64, key string, n float64) Decision {
	return e.take(ns, BoundedKey(key), n, true)
}

// take is the body of every take, on a key BoundedKey has already applied
// to. With detail false only Allowed is filled in (Allow needs nothing
// else).
func (e *Engine) take(ns int64, key string, n float64, detail bool) Decision {
	l := e.layout
	cost, ok := fixedpoint.Quantize(n)
	if !ok || cost > l.Capacity {
		return e.never(ns, key)
	}
	s, _, out, d := e.takeKey(shard.Hash(key), key, l.At(ns), ns, cost)
	switch out {
	case unstored:
		e.allowed.add()
		return Decision{Allowed: true, Remaining: e.burst}
	case refused:
		return d
	}
	return e.decision(s, ns, cost, detail)
}

// decision turns a fixedpoint step into a Decision and counts it.
func (e *Engine) decision(s fixedpoint.Step, ns int64, cost uint64, detail bool) Decision {
	e.count(s.Allowed)
	d := Decision{Allowed: s.Allowed}
	if detail {
		d.Remaining = fixedpoint.TokensOf(s.Tokens)
		if !s.Allowed {
			d.RetryAfter = e.wait(s.At, s.Tokens, cost, ns)
		}
		d.ResetAfter = e.wait(s.At, s.Tokens, e.layout.Capacity, ns)
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

// wait returns the time from ns until a bucket holding have quanta at tick at
// holds need quanta: to the start of the first tick that has them.
func (e *Engine) wait(at int64, have, need uint64, ns int64) time.Duration {
	if have >= need {
		return 0
	}
	l := e.layout
	k := l.TicksUntil(at, have, need)
	return since(ns, l.Nanos(at+int64(k)))
}

// since returns the wait from ns until the instant until (both in ns since
// the epoch), at least 0. ns is clamped to ±2^62 first, as every time is; a
// wait from there to a bucket stamped near +2^62 does not fit a Duration and
// saturates just short of InfDuration, which means never.
func since(ns, until int64) time.Duration {
	from := clampNanos(ns)
	if from < 0 && until > math.MaxInt64+from {
		return InfDuration - 1
	}
	return max(0, time.Duration(until-from))
}

// never is the decision for a cost that no bucket can ever pay.
func (e *Engine) never(ns int64, key string) Decision {
	e.denied.add()
	d := Decision{Remaining: e.burst, RetryAfter: InfDuration}
	l := e.layout
	if at, tokens, ok := e.stateOf(shard.Hash(key), key, l.At(ns)); ok {
		d.Remaining = fixedpoint.TokensOf(tokens)
		d.ResetAfter = e.wait(at, tokens, l.Capacity, ns)
	}
	return d
}

func clampNanos(ns int64) int64 {
	const bound = 1 << 62
	return min(max(ns, -bound), bound)
}
