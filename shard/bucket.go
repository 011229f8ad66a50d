package shard

import (
	"sync/atomic"

	"github.com/faucetgo/faucet/fixedpoint"
)

// Bucket is one key's token bucket. It lives in a single heap object together
// with its epoch and a copy of its key (see node.go), and keeps that address
// for its whole life: tables move pointers to buckets, never buckets, so a
// CompareAndSwap can never target a stale copy.
//
// Buckets are not padded: at a million keys a pad per bucket would cost more
// memory than everything else together, and a bucket's word is contended only
// when one key is.
type Bucket struct {
	// word is the packed (tick, tokens) state of fixedpoint.Word, its tick
	// relative to the base of the bucket's epoch. It is only ever replaced
	// whole, by CompareAndSwap, so a reader never sees tokens of one update
	// with the tick of another. Once it holds fixedpoint.Tomb it never
	// changes again: the bucket has been evicted, or replaced by one of a
	// later epoch, and is unreachable from its shard's index; takers must
	// look the key up afresh.
	word atomic.Uint64
}

// Status is how a take on a bucket ended.
type Status uint8

const (
	// Done: the step stands (taken and written, or denied, or a peek).
	Done Status = iota
	// Gone: the bucket was evicted or replaced; nothing was taken. Look the
	// key up again.
	Gone
	// NeedsEpoch: the take was allowed, but its state lies past the span of
	// the bucket's epoch; nothing was written. The bucket must be replaced
	// (Table.Replace).
	NeedsEpoch
)

// Load returns the bucket's word.
func (b *Bucket) Load() fixedpoint.Word { return fixedpoint.Word(b.word.Load()) }

// CompareAndSwap replaces old by new if the word still holds old.
func (b *Bucket) CompareAndSwap(old, new fixedpoint.Word) bool {
	return b.word.CompareAndSwap(uint64(old), uint64(new))
}

// base returns the first tick of the bucket's epoch, against which its word
// resolves.
func (b *Bucket) base(l *fixedpoint.Layout) int64 { return l.Base(b.Epoch()) }

// Take takes cost quanta (cost <= l.Capacity()) from the bucket at now.
//
// Lock-free: each attempt loads the word, computes the successor with the
// pure fixedpoint.Layout.Take against the bucket's own base, and publishes it
// with one CompareAndSwap. A failed CAS means another goroutine committed
// first, so we reload and recompute: the loop is lock-free, not wait-free.
// ABA is harmless: the word is a value, and equal words are equal states; a
// Tomb is final, so a dead bucket never comes back to life under a taker.
//
// A now earlier than the stored tick counts as the stored tick: tokens are not
// added and the tick does not move back (unlike x/time/rate, which rebases and
// can then credit an interval twice when callers' clocks are read out of
// order).
func (b *Bucket) Take(l *fixedpoint.Layout, now fixedpoint.Instant, cost uint64) (fixedpoint.Step, Status) {
	base := b.base(l)
	for {
		w := b.Load()
		if w == fixedpoint.Tomb {
			return fixedpoint.Step{}, Gone
		}
		s := l.Take(w, base, now, cost)
		if !s.Write() {
			if s.NeedsEpoch(cost) {
				return s, NeedsEpoch
			}
			return s, Done
		}
		if b.CompareAndSwap(w, s.Next) {
			return s, Done
		}
	}
}

// NewBucket returns a bucket of generation gen and epoch e holding w that
// belongs to no table and has no key, such as an engine's overflow bucket.
// Take and CompareAndSwap work on it as on any other; a Tomb in it is
// as final.
func NewBucket(gen uint16, e fixedpoint.Epoch, w fixedpoint.Word) *Bucket {
	return newBucket("", gen, e, uint64(w))
}
