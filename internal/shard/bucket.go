package shard

import (
	"sync/atomic"

	"github.com/faucetgo/faucet/internal/fixedpoint"
)

// Bucket is one key's token bucket: a 32-byte slot of its shard's index,
// holding the key's word, its epoch, its generation and its key (up to 16
// bytes in place; see key.go), so that a lookup and the take that follows
// read one cache line. Two slots share a 64-byte line.
//
// A slot is written once, before an atomic store of meta publishes it, and
// then only its word changes. A slot is never reused: once its word is a tomb
// it stays one until a rebuild drops it with the whole index (a rebuild moves
// each live word into the new index by tombing it first), so a goroutine
// still holding a slot can never write into another key's state, or into a
// copy of its own.
//
// The word is read and written only through the methods below, which keep its
// rules: every write is a CompareAndSwap from a word read before, so it lands
// only on the state it was computed from; a tomb is written only by Tomb and
// TombIf, and nothing writes over one.
type Bucket struct {
	// word is the packed (tick, tokens) state of fixedpoint.Word, its tick
	// relative to the base of the bucket's epoch. It is only ever replaced
	// whole, by CompareAndSwap, so a reader never sees tokens of one update
	// with the tick of another. Once it holds fixedpoint.Tomb it never
	// changes again: the bucket has been evicted, replaced by one of a
	// later epoch, or moved into a rebuilt index; takers must look the key
	// up afresh.
	word atomic.Uint64
	// epoch is the fixedpoint.Epoch the word resolves against; written
	// before meta publishes the slot, never after.
	epoch int32
	// meta publishes the slot: 0 while it is empty, else the generation in
	// the low 16 bits, the occupied flag, and how the key is held (keyMeta).
	// Stored once, after everything else in the slot; lookups load it first.
	meta atomic.Uint32
	// key holds a key of up to 16 bytes in place (packKey), or for a longer
	// key its index hash and its offset in the index's long-key arena.
	key [2]uint64
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

// load returns the bucket's word.
func (b *Bucket) load() fixedpoint.Word { return fixedpoint.Word(b.word.Load()) }

// compareAndSwap replaces old by new if the word still holds old.
func (b *Bucket) compareAndSwap(old, new fixedpoint.Word) bool {
	return b.word.CompareAndSwap(uint64(old), uint64(new))
}

// base returns the first tick of the bucket's epoch, against which its word
// resolves.
func (b *Bucket) base(l *fixedpoint.Layout) int64 { return l.Base(b.Epoch()) }

// Epoch returns the bucket's epoch. It is written before the bucket is
// published and never again.
func (b *Bucket) Epoch() fixedpoint.Epoch { return fixedpoint.Epoch(b.epoch) }

// Gen returns the bucket's generation: which of its engine's layouts its
// word is packed in. It is written with the epoch.
func (b *Bucket) Gen() uint16 { return uint16(b.meta.Load()) }

// Word returns the bucket's word, for a reader that changes nothing. live is
// false if the bucket is gone (evicted or replaced; its word is
// fixedpoint.Tomb, for good): look the key up again.
func (b *Bucket) Word() (w fixedpoint.Word, live bool) {
	w = b.load()
	return w, w != fixedpoint.Tomb
}

// Live reports whether the bucket is live: neither evicted nor replaced.
func (b *Bucket) Live() bool { return b.load() != fixedpoint.Tomb }

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
		w := b.load()
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
		if b.compareAndSwap(w, s.Next) {
			return s, Done
		}
	}
}

// Update replaces the bucket's word by f's result: every write other than a
// plain take (a give-back, a reservation, a take on a bucket that may need
// replacing). f is given the word and returns the word to put in its place,
// with write set, or declines (write false) and nothing is written. next
// must be a live word: a bucket is retired only by Tomb and TombIf.
//
// Lock-free, as Take: each attempt loads the word, calls f on it and
// publishes f's result by one CompareAndSwap from the word loaded, so the
// write lands only on the state it was computed from. A failed CAS means
// another write came first; nothing was written, so Update reloads and calls
// f again on the new word. f may thus run more than once and must act
// through its result alone: what it records on the side is from its last
// call. A tomb is final: f is never called on one.
//
// It returns the word f was last given, and live: false if the bucket is
// gone, nothing written (f may have run before the tomb landed). With live
// true, f's last answer stands: its word was published if it asked to
// write; if it declined, nothing was written, and orig is the word a
// replacement of the bucket must find (Table.Replace).
func (b *Bucket) Update(f func(orig fixedpoint.Word) (next fixedpoint.Word, write bool)) (orig fixedpoint.Word, live bool) {
	for {
		orig = b.load()
		if orig == fixedpoint.Tomb {
			return orig, false
		}
		next, write := f(orig)
		if !write {
			return orig, true
		}
		if next == fixedpoint.Tomb {
			panic("shard: Bucket.Update would write a tomb; retire a bucket with Tomb or TombIf")
		}
		if b.compareAndSwap(orig, next) {
			return orig, true
		}
	}
}

// TombIf retires the bucket, replacing its word by fixedpoint.Tomb, if f,
// given the word, reports true: an eviction (f finds the bucket full), or
// the retirement of a bucket whose state moves into a new one (f records the
// state; Table.Rewrite). It reports whether it did: false if f declined or
// the bucket was gone already. The caller then takes the bucket out of
// wherever it is found (Visitor, Rewriter).
//
// Lock-free: each attempt loads the word, asks f, and swaps the tomb in by
// one CompareAndSwap from the word loaded. A write that lands first (a take)
// makes the CAS fail, and f is asked again about the new word, so a take is
// never lost to an eviction: only the very state f judged is tombed. As for
// Update, f may run more than once, and what it records on the side is from
// its last call.
func (b *Bucket) TombIf(f func(orig fixedpoint.Word) bool) bool {
	for {
		orig := b.load()
		if orig == fixedpoint.Tomb || !f(orig) {
			return false
		}
		if b.compareAndSwap(orig, fixedpoint.Tomb) {
			return true
		}
	}
}

// retire replaces the bucket's word by fixedpoint.Tomb, whatever it is, and
// returns the word it replaced (Tomb if it was one already): the move of a
// bucket into a rebuilt index, which copies that word.
//
// Lock-free: a CompareAndSwap from the word loaded; a take that lands first
// makes it fail, and the word it wrote is the one retired.
func (b *Bucket) retire() fixedpoint.Word {
	for {
		w := b.load()
		if w == fixedpoint.Tomb || b.compareAndSwap(w, fixedpoint.Tomb) {
			return w
		}
	}
}

// Tomb retires the bucket, replacing its word by fixedpoint.Tomb, if the word
// is still w, and reports whether it did. It is the one step of a
// replacement that touches the old bucket (Table.Replace, and the engine's
// overflow bucket): taken under the mutex that guards where the bucket is
// found, it fails if the word is no longer w (a write landed since w was
// read), and the caller computes again.
func (b *Bucket) Tomb(w fixedpoint.Word) bool {
	return w != fixedpoint.Tomb && b.compareAndSwap(w, fixedpoint.Tomb)
}

// NewBucket returns a bucket of generation gen and epoch e holding w that
// belongs to no table and has no key, such as an engine's overflow bucket.
// Every method works on it as on any other; a Tomb in it is as final.
func NewBucket(gen uint16, e fixedpoint.Epoch, w fixedpoint.Word) *Bucket {
	b := &Bucket{epoch: int32(e)}
	b.word.Store(uint64(w))
	b.meta.Store(occupied | uint32(gen))
	return b
}

// live reports whether the slot is published and its word is no tomb.
func (b *Bucket) live() bool {
	return b.meta.Load() != 0 && b.load() != fixedpoint.Tomb
}
