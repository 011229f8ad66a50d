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

const (
	groupSlots = 7
	lowBits    = 0x0001010101010101 // one bit per slot byte
	highBits   = 0x0080808080808080
)

// group is one cache line of an index: a word of tag bytes (one per slot,
// the eighth byte unused) and seven bucket pointers, so that a probe finds a
// candidate's tag and pointer with one memory access.
type group struct {
	// tags holds one byte per slot: 0 empty, 1 deleted, 2..255 occupied (a
	// byte of the key's index hash). One word so that readers load all
	// seven atomically.
	tags  atomic.Uint64
	slots [groupSlots]atomic.Pointer[Bucket]
}

// index is one shard's open-addressing hash index from keys to buckets,
// probing group by group. Readers never lock: they load the index pointer,
// then each probed group's tag word and, on a tag match, the slot's bucket
// pointer, and compare the bucket's key. Writers hold the shard's mutex.
//
// A writer fills a slot by storing the pointer before the tag word, so a
// reader that sees the tag also sees the pointer. Deleting sets the tag to
// deleted (probes continue past it) and then clears the pointer (a reader
// that read the old tag finds nil, or the evicted bucket's tomb, and moves
// on). Only a rebuild turns slots empty, and a rebuild writes a new index
// that is published whole; readers still on the old one find every key that
// existed before the swap, and fall back to the locked path for the rest.
type index struct {
	mask   uint64 // groups - 1
	groups []group
	// used counts occupied and deleted slots, live the occupied ones; both
	// are touched only under the shard's mutex.
	used, live int
}

const minGroups = 2

func newIndex(slots int) *index {
	n := max(minGroups, 1<<bits.Len(uint((slots+groupSlots-1)/groupSlots-1)))
	return &index{mask: uint64(n - 1), groups: make([]group, n)}
}

func tagOf(h uint64) uint64 {
	t := h >> 56
	if t < 2 {
		t += 2
	}
	return t
}

// matches returns a mask with the high bit set in each slot byte of tags
// equal to t (and possibly in bytes above a true match, which the caller's key
// comparison rejects).
func matches(tags, t uint64) uint64 {
	x := tags ^ (lowBits * t)
	return (x - lowBits) &^ x & highBits
}

// find returns the bucket of key, or nil. h is the index hash.
func (ix *index) find(h uint64, key string) *Bucket {
	want := tagOf(h)
	for g := (h >> 3) & ix.mask; ; g = (g + 1) & ix.mask {
		grp := &ix.groups[g]
		tags := grp.tags.Load()
		for m := matches(tags, want); m != 0; m &= m - 1 {
			j := bits.TrailingZeros64(m) >> 3
			if b := grp.slots[j].Load(); b != nil && b.hasKey(key) {
				return b
			}
		}
		if matches(tags, tagEmpty) != 0 {
			return nil
		}
	}
}

// insert puts b, which must not be present, into the first free slot of its
// probe sequence. The caller holds the mutex and has checked full().
func (ix *index) insert(h uint64, b *Bucket) {
	for g := (h >> 3) & ix.mask; ; g = (g + 1) & ix.mask {
		grp := &ix.groups[g]
		tags := grp.tags.Load()
		for j := range uint64(groupSlots) {
			t := tags >> (8 * j) & 0xFF
			if t != tagEmpty && t != tagDeleted {
				continue
			}
			grp.slots[j].Store(b)
			grp.tags.Store(tags&^(0xFF<<(8*j)) | tagOf(h)<<(8*j))
			if t == tagEmpty {
				ix.used++
			}
			ix.live++
			return
		}
	}
}

// swap puts nb in the slot that holds old (nb has old's key, so the tag
// stays). The caller holds the mutex, and old is in the index.
func (ix *index) swap(h uint64, old, nb *Bucket) {
	want := tagOf(h)
	for g := (h >> 3) & ix.mask; ; g = (g + 1) & ix.mask {
		grp := &ix.groups[g]
		for m := matches(grp.tags.Load(), want); m != 0; m &= m - 1 {
			j := bits.TrailingZeros64(m) >> 3
			if grp.slots[j].Load() == old {
				grp.slots[j].Store(nb)
				return
			}
		}
	}
}

// remove deletes the entry in slot j of group g.
func (ix *index) remove(g, j uint64) {
	grp := &ix.groups[g]
	grp.tags.Store(grp.tags.Load()&^(0xFF<<(8*j)) | tagDeleted<<(8*j))
	grp.slots[j].Store(nil)
	ix.live--
}

// occupied reports whether slot j of group g holds a bucket.
func (ix *index) occupied(g, j uint64) bool {
	return ix.groups[g].tags.Load()>>(8*j)&0xFF >= 2
}

func (ix *index) slots() uint64 { return uint64(len(ix.groups)) * groupSlots }

// full reports whether one more insert would push occupied plus deleted slots
// past three quarters, where probe sequences grow long.
func (ix *index) full() bool {
	return uint64(ix.used+1)*4 > ix.slots()*3
}

// rebuilt returns a new index holding the live entries of ix, sized for them
// to fill between a quarter and half of it (deleted slots are dropped).
func (ix *index) rebuilt(hash func(*Bucket) uint64) *index {
	nx := newIndex(2 * (ix.live + 1))
	for g := range ix.groups {
		for j := range uint64(groupSlots) {
			if ix.occupied(uint64(g), j) {
				b := ix.groups[g].slots[j].Load()
				nx.insert(hash(b), b)
			}
		}
	}
	return nx
}
