package shard

import (
	"sync/atomic"

	"github.com/faucetgo/faucet/fixedpoint"
)

// Bucket is one key's token bucket. It lives in a single heap object together
// with a copy of its key (see node.go), and keeps that address for its whole
// life: tables move pointers to buckets, never buckets, so a CompareAndSwap
// can never target a stale copy.
//
// Buckets are not padded: at a million keys a pad per bucket would cost more
// memory than everything else together, and a bucket's word is contended only
// when one key is.
type Bucket struct {
	// word is the packed (tick, tokens) state of fixedpoint.Word. It is only
	// ever replaced whole, by CompareAndSwap, so a reader never sees tokens of
	// one update with the tick of another. Once it holds fixedpoint.Tomb it
	// never changes again: the bucket has been evicted and is unreachable
	// from its shard's index, and takers must look the key up afresh.
	word atomic.Uint64
}

// Load returns the bucket's word.
func (b *Bucket) Load() fixedpoint.Word { return fixedpoint.Word(b.word.Load()) }

// CompareAndSwap replaces old by new if the word still holds old.
func (b *Bucket) CompareAndSwap(old, new fixedpoint.Word) bool {
	return b.word.CompareAndSwap(uint64(old), uint64(new))
}

// Take takes cost quanta (cost <= l.Capacity) from the bucket at now.
// It returns live == false, and changes nothing, if the bucket was evicted.
//
// Lock-free: each attempt loads the word, then the reference tick, computes
// the successor with the pure fixedpoint.Layout.Take, and publishes it with
// one CompareAndSwap. A failed CAS means another goroutine committed first,
// so we reload and recompute: the loop is lock-free, not wait-free. ABA is
// harmless: the word is a value, and equal words are equal states; a Tomb is
// final, so an evicted bucket never comes back to life under a taker.
//
// The word is loaded before the reference so that a word written after a
// raise of the reference is always read against the raised value; a write
// past the reference raises it before publishing (Ref.Cover).
//
// A now earlier than the stored tick counts as the stored tick: tokens are not
// added and the tick does not move back (unlike x/time/rate, which rebases and
// can then credit an interval twice when callers' clocks are read out of
// order).
func (b *Bucket) Take(l *fixedpoint.Layout, ref *Ref, now fixedpoint.Instant, cost uint64) (s fixedpoint.Step, live bool) {
	for {
		w := b.Load()
		if w == fixedpoint.Tomb {
			return s, false
		}
		r := ref.Load()
		s = l.Take(w, r, now, cost)
		if !s.Write() {
			return s, true
		}
		ref.Cover(l, r, s.At)
		if b.CompareAndSwap(w, s.Next) {
			return s, true
		}
		if !s.Allowed {
			// Only a renewal failed: someone else wrote a fresher word,
			// which is all the renewal was for. The decision stands.
			return s, true
		}
	}
}

// Peek returns the bucket's state at now without changing it; live is
// false if the bucket was evicted.
func (b *Bucket) Peek(l *fixedpoint.Layout, ref *Ref, now fixedpoint.Instant) (at int64, tokens uint64, live bool) {
	w := b.Load()
	if w == fixedpoint.Tomb {
		return 0, 0, false
	}
	_, at, tokens = l.Advance(w, ref.Load(), now)
	return at, tokens, true
}

// NewBucket returns a bucket holding w that belongs to no table and has no
// key, such as an engine's overflow bucket. Take, Peek and CompareAndSwap
// work on it as on any other; a Tomb in it is as final.
func NewBucket(w fixedpoint.Word) *Bucket { return newBucket("", uint64(w)) }
