package shard

import (
	"math/bits"
	"sync/atomic"
)

// Tag bytes of an index slot.
const (
	tagEmpty   = 0
	tagDeleted = 1
)

// index is one shard's open-addressing hash index (linear probing) from keys
// to buckets. Readers never lock: they load the index pointer, then for each
// probed slot its tag byte and, on a tag match, its bucket pointer, and
// compare the bucket's key. Writers hold the shard's mutex.
//
// A writer fills a slot by storing the pointer before the tag, so a reader
// that sees the tag also sees the pointer. Deleting sets the tag to deleted
// (readers probe on past it) and then clears the pointer (a reader that got
// the tag first finds nil and probes on). Only a rebuild turns slots empty,
// and a rebuild writes a new index that is published whole; readers still on
// the old one find every key that existed before the swap, and fall back to
// the locked path for the rest.
type index struct {
	mask uint64
	// tags holds one byte per slot, eight to a word so that readers can load
	// them atomically: 0 empty, 1 deleted, 2..255 occupied (a byte of the
	// key's hash).
	tags  []atomic.Uint64
	slots []atomic.Pointer[Bucket]
	// used counts occupied and deleted slots, live the occupied ones; both
	// are touched only under the shard's mutex.
	used, live int
}

const minIndex = 16

func newIndex(capacity int) *index {
	n := max(minIndex, 1<<bits.Len(uint(capacity-1)))
	return &index{
		mask:  uint64(n - 1),
		tags:  make([]atomic.Uint64, n/8),
		slots: make([]atomic.Pointer[Bucket], n),
	}
}

func tagOf(h uint64) uint8 {
	t := uint8(h >> 56)
	if t < 2 {
		t += 2
	}
	return t
}

func (ix *index) tag(i uint64) uint8 {
	return uint8(ix.tags[i>>3].Load() >> ((i & 7) * 8))
}

// setTag is called only under the shard's mutex, so a plain read-modify-write
// of the tag word is enough; the store publishes all eight bytes at once.
func (ix *index) setTag(i uint64, t uint8) {
	sh := (i & 7) * 8
	w := &ix.tags[i>>3]
	w.Store(w.Load()&^(0xFF<<sh) | uint64(t)<<sh)
}

// find returns the bucket of key and its slot, or nil. h is the index hash.
func (ix *index) find(h uint64, key string) (*Bucket, uint64) {
	want := tagOf(h)
	for i := h & ix.mask; ; i = (i + 1) & ix.mask {
		switch t := ix.tag(i); t {
		case tagEmpty:
			return nil, 0
		case want:
			if b := ix.slots[i].Load(); b != nil && b.Key() == key {
				return b, i
			}
		}
	}
}

// insert puts b, which must not be present, into the first free slot of its
// probe sequence. The caller holds the mutex and has checked that the index
// has room (full reports when it must be rebuilt first).
func (ix *index) insert(h uint64, b *Bucket) {
	for i := h & ix.mask; ; i = (i + 1) & ix.mask {
		t := ix.tag(i)
		if t == tagEmpty || t == tagDeleted {
			ix.slots[i].Store(b)
			ix.setTag(i, tagOf(h))
			if t == tagEmpty {
				ix.used++
			}
			ix.live++
			return
		}
	}
}

// remove deletes the entry in slot i.
func (ix *index) remove(i uint64) {
	ix.setTag(i, tagDeleted)
	ix.slots[i].Store(nil)
	ix.live--
}

// full reports whether one more insert would push occupied plus deleted slots
// past three quarters, where linear probing slows down.
func (ix *index) full() bool {
	return (ix.used+1)*4 > len(ix.slots)*3
}

// rebuilt returns a new index holding the live entries of ix, sized for them
// to fill between a quarter and half of it (deleted slots are dropped).
func (ix *index) rebuilt(hash func(*Bucket) uint64) *index {
	nx := newIndex(2 * (ix.live + 1))
	for i := range ix.slots {
		if ix.tag(uint64(i)) < 2 {
			continue
		}
		b := ix.slots[i].Load()
		nx.insert(hash(b), b)
	}
	return nx
}
