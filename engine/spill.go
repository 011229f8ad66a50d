package engine

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/faucetgo/faucet/fixedpoint"
	"github.com/faucetgo/faucet/shard"
)

// spillBucket holds the overflow bucket of FullShare: the one bucket that
// every key without a bucket of its own takes from while MaxKeys buckets are
// live and none can be evicted. It is a bucket like the table's, outside the
// table: takes on it are the same lock-free CompareAndSwap loop, a sweep
// evicts it when it is full, which is as lossless as for any bucket, and a
// take past its epoch's span replaces it.
type spillBucket struct {
	// b is the current overflow bucket, or nil: none was needed yet, or a
	// sweep evicted it. Takers load it without a lock; it is replaced only
	// under mu.
	b  atomic.Pointer[shard.Bucket]
	mu sync.Mutex
	// evictedAt is the tick of the latest eviction of an overflow bucket. A
	// new one is full from no earlier tick, as a new bucket in a shard is
	// from the shard's watermark, so that a caller whose time is older than
	// the eviction finds the full bucket the eviction found. Guarded by mu.
	evictedAt int64
}

func (sp *spillBucket) init() { sp.evictedAt = math.MinInt64 }

// overflowBucket returns the overflow bucket, first making a full one if
// there is none (or the one there was evicted).
func (e *Engine) overflowBucket(now fixedpoint.Instant) *shard.Bucket {
	sp := &e.spill
	if b := sp.b.Load(); b != nil && b.Load() != fixedpoint.Tomb {
		return b
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if b := sp.b.Load(); b != nil && b.Load() != fixedpoint.Tomb {
		return b
	}
	l := e.layout
	b := shard.NewBucket(l.PackNew(l.FullTick(e.bornAt(now).Ceil, sp.evictedAt), l.Capacity))
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
// bucket of epoch ep holding next (see shard.Table.Replace, which it mirrors).
func (e *Engine) replaceOverflow(old *shard.Bucket, w fixedpoint.Word, ep fixedpoint.Epoch, next fixedpoint.Word) (*shard.Bucket, bool) {
	sp := &e.spill
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if cur := sp.b.Load(); cur != old {
		return cur, false
	}
	if !old.CompareAndSwap(w, fixedpoint.Tomb) {
		return old, false
	}
	nb := shard.NewBucket(ep, next)
	sp.b.Store(nb)
	return nb, true
}

// tableFull reports whether a new key at now would find no room: MaxKeys
// buckets live and, by the last eviction scan, none full before now. It is
// for reports (peek, TokensAt), which must not evict to find out.
func (e *Engine) tableFull(now fixedpoint.Instant) bool {
	return e.maxKeys > 0 && e.live.Load() >= e.maxKeys && now.Tick < e.noEvictBefore.Load()
}

// overflowState returns the overflow bucket's state at now, if there is
// one; without one, a new one would be full.
func (e *Engine) overflowState(now fixedpoint.Instant) (at int64, tokens uint64, ok bool) {
	if b := e.currentOverflow(); b != nil {
		return b.Peek(e.layout, now)
	}
	return 0, 0, false
}

// sweepOverflow evicts the overflow bucket if it is full at now, as a sweep
// does for the table's buckets. An evicted overflow bucket counts in neither
// Len nor Stats.Evicted: it is no key's.
func (e *Engine) sweepOverflow(now fixedpoint.Instant) {
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
	if evicted, at, _ := e.evictIfFull(b, now); evicted {
		sp.evictedAt = max(sp.evictedAt, at)
		sp.b.Store(nil)
	}
}
