package engine

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/faucetgo/faucet/internal/fixedpoint"
	"github.com/faucetgo/faucet/internal/shard"
)

// spillBucket holds the overflow bucket of FullShare: the one bucket that
// every key without a bucket of its own takes from while MaxKeys buckets are
// live and none can be evicted. It is a bucket like the table's, outside the
// table: takes on it are the same lock-free CompareAndSwap loop, a sweep
// evicts it when it is full, which is as lossless as for any bucket, and a
// take past its epoch's span, or on it after a change of limit, replaces it.
type spillBucket struct {
	// b is the current overflow bucket, or nil: none was needed yet, or a
	// sweep evicted it. Takers load it without a lock; it is replaced only
	// under mu.
	b  atomic.Pointer[shard.Bucket]
	mu sync.Mutex
	// evictedAt is the time (nanoseconds since the epoch) of the latest
	// eviction of an overflow bucket. A new one is full from no earlier, as
	// a new bucket in a shard is from the shard's watermark, so that a caller
	// whose time is older than the eviction finds the full bucket the
	// eviction found. Guarded by mu.
	evictedAt int64
}

func (sp *spillBucket) init() { sp.evictedAt = math.MinInt64 }

// overflowBucket returns the overflow bucket, first making a new one if there
// is none (or the one there was evicted), as a new bucket in the table is
// made (generation.fresh), from born (nanoseconds since the epoch) or from
// the last overflow bucket's eviction. It is of the generation in force,
// read under the mutex, as Insert does.
func (e *Engine) overflowBucket(born int64) *shard.Bucket {
	sp := &e.spill
	if b := sp.b.Load(); b != nil && b.Live() {
		return b
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if b := sp.b.Load(); b != nil && b.Live() {
		return b
	}
	g := e.current()
	ep, w := g.fresh(born, sp.evictedAt)
	b := shard.NewBucket(g.id, ep, w)
	sp.b.Store(b)
	return b
}

// currentOverflow returns the overflow bucket in place now (nil if none),
// under its mutex, so never one that a replacement has tombed but not yet
// swapped out.
func (e *Engine) currentOverflow() *shard.Bucket {
	sp := &e.spill
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.b.Load()
}

// replaceOverflow replaces old, the overflow bucket whose word is w, by a
// bucket of generation gen and epoch ep holding next (see
// shard.Table.Replace, which it mirrors).
func (e *Engine) replaceOverflow(old *shard.Bucket, w fixedpoint.Word, gen uint16, ep fixedpoint.Epoch, next fixedpoint.Word) (*shard.Bucket, bool) {
	sp := &e.spill
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if cur := sp.b.Load(); cur != old {
		return cur, false
	}
	if e.current().id != gen || !old.Tomb(w) {
		return old, false
	}
	nb := shard.NewBucket(gen, ep, next)
	sp.b.Store(nb)
	return nb, true
}

// tableFull reports whether a new key at ns would find no room: MaxKeys
// buckets live and, by the last eviction scan, none full before ns. It is
// for reports (peek, TokensAt), which must not evict to find out.
func (e *Engine) tableFull(ns int64) bool {
	return e.maxKeys > 0 && e.live.Load() >= e.maxKeys && ns < e.noEvictBefore.Load()
}

// overflowState returns the overflow bucket's state at ns, read in
// generation g (or a newer one, which it returns, if SetAt raced), if there
// is one; without one, a new one would be full.
func (e *Engine) overflowState(g *generation, ns int64) (_ *generation, at int64, tokens uint64, ok bool) {
	b := e.currentOverflow()
	for {
		if b == nil {
			if c := e.current(); c != g { // as in stateOf
				g, b = c, e.currentOverflow()
				continue
			}
			return g, 0, 0, false
		}
		w, ep, live, fresh := g.view(b)
		if !fresh {
			g = e.current()
			continue
		}
		if !live {
			b = e.currentOverflow()
			continue
		}
		l := g.layout
		_, at, tokens = l.Advance(w, l.Base(ep), l.At(ns))
		return g, at, tokens, true
	}
}

// sweepOverflow evicts the overflow bucket if it is full at ns, as a sweep
// does for the table's buckets. An evicted overflow bucket counts in neither
// Len nor Stats.Evicted: it is no key's.
func (e *Engine) sweepOverflow(ns int64) {
	sp := &e.spill
	b := sp.b.Load()
	if b == nil {
		return
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.b.Load() != b {
		return
	}
	if evicted, at, _ := e.evictIfFull(e.current(), b, ns); evicted {
		sp.evictedAt = max(sp.evictedAt, at)
		sp.b.Store(nil)
	}
}
