package shard

import (
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/faucetgo/faucet/internal/fixedpoint"
)

// line is one 64-byte cache line of an index: two slots.
type line [2]Bucket

const lineBytes = unsafe.Sizeof(line{})

// index is one shard's open-addressing hash table of slots, probed line by
// line from the line its key's index hash picks. Readers never lock: they
// load the index pointer, then each probed slot's meta and, if it is
// published, its key words, in the line they already read. Writers hold the
// shard's mutex.
//
// A slot is filled once: its word, epoch and key are written before meta is
// stored, so a reader that sees meta sees the rest. It is never emptied and
// never filled again: an evicted or replaced bucket's word turns to a tomb
// and the slot stays taken, so probe sequences never break and a stale
// holder of the slot finds the tomb. Only a rebuild drops tombs, into a new
// index published whole. The rebuild tombs every live word it copies, by
// CompareAndSwap, before it copies it: no write can land on the old copy
// afterwards, and takes that find the tomb look the key up again, under the
// mutex if the new index is not out yet.
type index struct {
	lines []line
	// long is the arena of keys of more than 16 bytes (key.go); longUsed
	// is how much of it is taken (under the shard's mutex).
	long     atomic.Pointer[[]byte]
	longUsed int
	// used counts published slots, live those whose word is no tomb; both
	// are touched only under the shard's mutex.
	used, live int
}

const (
	minLines = 2
	// A rebuilt index holds its live slots at loadAfter (in hundredths),
	// and is rebuilt when used slots would pass loadMax: capacities grow by
	// about 1.3 at a time, so a live key costs between 32/0.75 and 32/0.58
	// bytes of index.
	loadAfter = 58
	loadMax   = 75
)

// newIndex returns an empty index with room for live slots at loadAfter.
func newIndex(live int) *index {
	slots := (live*100 + loadAfter - 1) / loadAfter
	return &index{lines: newLines(max(minLines, (slots+1)/2))}
}

// newLines allocates n lines aligned to 64 bytes, so that no slot straddles
// two cache lines. The memory holds no pointers: the garbage collector never
// scans an index.
func newLines(n int) []line {
	buf := make([]byte, (uintptr(n)+1)*lineBytes)
	p := unsafe.Pointer(unsafe.SliceData(buf))
	return unsafe.Slice((*line)(unsafe.Add(p, -uintptr(p)&(lineBytes-1))), n)
}

// start returns the line key's probe starts at: the index hash scaled to the
// number of lines (a multiply, not a mask, since capacities are not powers
// of two).
func (ix *index) start(m uint64) uint64 {
	hi, _ := bits.Mul64(m, uint64(len(ix.lines)))
	return hi
}

// find returns key's live bucket; failing that, a tombed slot of key (an
// evicted bucket, or one a replacement or a rebuild is moving: the caller
// must look again under the mutex); failing that, nil.
//
// Lock-free: one atomic load of meta per probed slot; the key words and the
// word read after it lie in the same line.
func (ix *index) find(m uint64, key string) *Bucket {
	want, k0, k1 := keyWords(m, key)
	var tombed *Bucket
	n := uint64(len(ix.lines))
	for i := ix.start(m); ; {
		ln := &ix.lines[i]
		for j := range ln {
			b := &ln[j]
			meta := b.meta.Load()
			if meta == 0 {
				return tombed
			}
			// One branch for the three words: which slot holds the key is
			// as good as random, and a branch per word mispredicts for
			// keys that share a first or a last 8 bytes.
			if uint64(meta&^genMask^want)|(b.key[0]^k0)|(b.key[1]^k1) == 0 || ix.longMatch(b, meta, want, k0, key) {
				if b.word.Load() != uint64(fixedpoint.Tomb) {
					return b
				}
				tombed = b
			}
		}
		if i++; i == n {
			i = 0
		}
	}
}

// findLive returns key's live bucket, or nil. The caller holds the mutex,
// under which no live word turns to a tomb.
func (ix *index) findLive(m uint64, key string) *Bucket {
	if b := ix.find(m, key); b != nil && b.Live() {
		return b
	}
	return nil
}

// insert publishes a bucket of generation gen and epoch e holding w for key
// (index hash m), which has no live bucket in ix, in the first empty slot of
// its probe sequence. The caller holds the mutex and has checked full().
func (ix *index) insert(m uint64, key string, gen uint16, e fixedpoint.Epoch, w fixedpoint.Word) *Bucket {
	meta, k0, k1 := keyWords(m, key)
	if meta&longKey != 0 {
		k1 = ix.appendLong(unsafe.Slice(unsafe.StringData(key), len(key)))
	}
	return ix.place(m, meta, k0, k1, gen, e, w)
}

// place fills the first empty slot from m's line with the given contents,
// meta last.
func (ix *index) place(m uint64, meta uint32, k0, k1 uint64, gen uint16, e fixedpoint.Epoch, w fixedpoint.Word) *Bucket {
	n := uint64(len(ix.lines))
	for i := ix.start(m); ; {
		ln := &ix.lines[i]
		for j := range ln {
			b := &ln[j]
			if b.meta.Load() != 0 {
				continue
			}
			b.epoch = int32(e)
			b.key = [2]uint64{k0, k1}
			b.word.Store(uint64(w))
			b.meta.Store(meta | uint32(gen))
			ix.used++
			ix.live++
			return b
		}
		if i++; i == n {
			i = 0
		}
	}
}

func (ix *index) slots() uint64 { return uint64(len(ix.lines)) * 2 }

// slot returns slot i (0 <= i < slots()).
func (ix *index) slot(i uint64) *Bucket { return &ix.lines[i/2][i%2] }

// full reports whether one more slot would push the used ones past loadMax.
func (ix *index) full() bool {
	return uint64(ix.used+1)*100 > ix.slots()*loadMax
}

// Mover gives what the live bucket b, whose word was orig when the rebuild
// tombed it, holds once moved into a rebuilt index: its generation, epoch
// and word. A nil Mover moves buckets as they are.
type Mover func(b *Bucket, orig fixedpoint.Word) (gen uint16, e fixedpoint.Epoch, w fixedpoint.Word)

// rebuilt returns a new index holding the live buckets of ix, as move has
// them, with room for extra more at loadAfter. Each is tombed in ix before
// its copy is placed, and the copy is made from the very word the tomb
// replaced. mix is the table's index hash. The caller holds the mutex and
// publishes the result.
func (ix *index) rebuilt(extra int, mix func(uint64) uint64, move Mover) *index {
	nx := newIndex(ix.live + extra)
	long := ix.arena()
	for i := range ix.slots() {
		b := ix.slot(i)
		meta := b.meta.Load()
		if meta == 0 {
			continue
		}
		orig := b.retire()
		if orig == fixedpoint.Tomb {
			continue // evicted or replaced before
		}
		gen, e, w := uint16(meta), b.Epoch(), orig
		if move != nil {
			gen, e, w = move(b, orig)
		}
		k0, k1 := b.key[0], b.key[1]
		m := k0
		if meta&longKey != 0 {
			k1 = nx.appendLong(arenaKey(long, k1))
		} else {
			m = mix(keyHash(b, meta, nil))
		}
		nx.place(m, meta&^genMask, k0, k1, gen, e, w)
	}
	return nx
}
