package engine

import (
	"math"
	"time"

	"github.com/faucetgo/faucet/internal/fixedpoint"
	"github.com/faucetgo/faucet/internal/shard"
)

// evictBudget bounds the buckets one new key may inspect looking for a full
// one to evict, so that a flood of new keys against a full table costs each
// of them O(1).
const evictBudget = 256

// maxReserveTries bounds how often a new key evicts a bucket and then loses
// the freed room to another new key before giving up.
const maxReserveTries = 3

// create inserts a bucket of generation g for key and returns its place. If
// MaxKeys buckets are live and none can be evicted it returns the overflow
// bucket instead (FullShare), or no bucket and the capacity denial
// (FullDeny), counted. overflowed is the call's own: a call that retries
// after its overflow bucket was evicted under it is counted in
// Stats.Overflow once.
func (e *Engine) create(g *generation, h uint64, key string, now fixedpoint.Instant, ns int64, overflowed *bool) (place, Decision) {
	if !e.reserve(g, ns) {
		if !*overflowed {
			*overflowed = true
			e.overflow.Add(1)
		}
		if e.onFull == FullShare {
			return place{b: e.overflowBucket(g.bornAt(now)), spill: true}, Decision{}
		}
		e.denied.add()
		return place{}, Decision{RetryAfter: e.capacityWait(ns)}
	}
	b, created := e.table.Insert(h, key, (*gens)(e), g.bornAt(now))
	if !created {
		e.live.Add(-1) // someone else created it first; give back the room
	}
	return place{b: b}, Decision{}
}

// bornAt is the time (nanoseconds since the epoch) a new bucket, created by a
// call at now in generation g, is full from. A new bucket is full at every
// tick since its shard's last eviction, so it is stamped early, a quarter of
// an epoch's span before now (Insert raises that to the eviction), not at
// this call's time. A caller with an earlier time whose take lands on the new
// bucket before this call's own take is then decided at its own time, as if
// it had come first, rather than at this call's (P14). The stamp's epoch
// leaves this call's own take room: now lies less than three quarters of the
// span past the epoch's base.
func (g *generation) bornAt(now fixedpoint.Instant) int64 {
	l := g.layout
	return l.Nanos(now.Ceil - int64(1)<<(l.TickBits()-2))
}

// reserve counts one more live bucket, evicting a full one (at ns, judged in
// generation g) first if MaxKeys are live. It reports false if there is no
// room.
func (e *Engine) reserve(g *generation, ns int64) bool {
	if e.maxKeys == 0 {
		e.live.Add(1)
		return true
	}
	for try := 0; ; {
		n := e.live.Load()
		if n < e.maxKeys {
			if e.live.CompareAndSwap(n, n+1) {
				return true
			}
			continue
		}
		if try++; try > maxReserveTries || !e.evictForRoom(g, ns) {
			return false
		}
	}
}

// evictForRoom evicts one full bucket, searching at most evictBudget buckets.
func (e *Engine) evictForRoom(g *generation, ns int64) bool {
	if ns < e.noEvictBefore.Load() {
		return false
	}
	soonest := int64(math.MaxInt64)
	found := e.table.EvictOne(evictBudget, func(b *shard.Bucket) (bool, int64) {
		evicted, at, fullAt := e.evictIfFull(g, b, ns)
		soonest = min(soonest, fullAt)
		return evicted, at
	})
	if found {
		e.evicted.Add(1)
		e.live.Add(-1)
		return true
	}
	// A scan that saw no bucket at all (every live count a reservation not
	// yet inserted, or an eviction not yet subtracted) proves nothing: a
	// soonest of MaxInt64 stored here would stop capacity evictions for
	// good.
	if soonest != math.MaxInt64 {
		e.noEvictBefore.Store(soonest)
	}
	return false
}

// capacityWait is the RetryAfter of a capacity denial at ns: until the
// soonest time at which the last scan expects a bucket to be full, at least
// a nanosecond.
func (e *Engine) capacityWait(ns int64) time.Duration {
	return since(ns, max(e.noEvictBefore.Load(), ns+1))
}

// evictIfFull tombs b if the bucket is full at ns, as generation g reads it,
// and so is a key without a bucket (a raise of the burst leaves those short
// of it for a while: see generation.blank). It returns whether it evicted,
// the time the eviction was decided at, and otherwise the time from which
// the bucket will be full if left alone (times in nanoseconds since the
// epoch).
//
// A bucket whose last update is later than ns (a clock behind the bucket)
// is never evicted. The eviction is shard.Bucket.TombIf, one CompareAndSwap
// from the word that showed a full bucket, so a concurrent take either lands
// first (the CAS fails and the bucket is judged again) or finds the tomb and
// starts a new, full bucket at no earlier time: eviction never loses a take.
func (e *Engine) evictIfFull(g *generation, b *shard.Bucket, ns int64) (evicted bool, at, fullAt int64) {
	for {
		stale := false
		fullAt = math.MaxInt64 // for a bucket found gone: no time to report
		evicted = b.TombIf(func(orig fixedpoint.Word) bool {
			w, ep, fresh := g.read(b, orig)
			if !fresh {
				stale = true
				return false
			}
			l := g.layout
			now := l.At(ns)
			last, tick, tokens := l.Advance(w, l.Base(ep), now)
			if now.Tick < last {
				fullAt = l.Nanos(last)
				return false
			}
			if tokens == l.Capacity() && ns >= g.fullAt {
				at = l.Nanos(tick)
				return true
			}
			fullAt = max(g.fullAt, l.Nanos(tick+int64(l.TicksUntil(tick, tokens, l.Capacity()))))
			return false
		})
		switch {
		case stale:
			g = e.current()
		case evicted:
			return true, at, 0
		default:
			return false, 0, fullAt
		}
	}
}
