package shard

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cespare/xxhash/v2"
	"github.com/faucetgo/faucet/internal/fixedpoint"
	"golang.org/x/sys/cpu"
)

// shard is one of a Table's independent partitions: a lock-free index of
// buckets for lookups, a mutex for inserts, deletes and rebuilds, and the
// time of its latest eviction.
type shard struct {
	mu sync.Mutex
	// index is replaced whole on rebuild; readers load it once per lookup.
	index atomic.Pointer[index]
	// watermark is the latest time, in nanoseconds since the engine's
	// epoch, at which a bucket of this shard was evicted. New buckets start
	// no earlier, so that a caller whose time is older than an eviction sees
	// the full bucket the eviction saw, as if the evicted bucket were still
	// there. It is math.MinInt64 until the first eviction: a new bucket at a
	// time before the epoch (a caller's clock read before the first call)
	// starts at that time. In nanoseconds rather than ticks, because a
	// change of the engine's burst changes the tick.
	watermark atomic.Int64
	// cursor is where the next capacity eviction scan of this shard starts;
	// guarded by mu.
	cursor uint64
}

const cacheLine = unsafe.Sizeof(cpu.CacheLinePad{})

// paddedShard rounds a shard up to whole cache lines. Shards are few and their
// headers are written by many cores; without the pad two shards' mutexes
// would share a line and contend.
type paddedShard struct {
	shard
	//lint:ignore U1000 prevents false sharing between shards
	_ [(cacheLine - unsafe.Sizeof(shard{})%cacheLine) % cacheLine]byte
}

// Table maps keys to buckets across 2^k shards. The caller hashes each key
// once with Hash and passes the hash to every call for that key.
type Table struct {
	//lint:ignore U1000 keeps the shard array's neighbours off its first line
	_      cpu.CacheLinePad
	shards []paddedShard
	shift  uint
	// seed keys the in-shard index hash. The shard is picked from the plain
	// xxhash of the key, which anyone can compute; the slot within a shard is
	// picked from a seeded mix of it, so crafted keys cannot pile into one
	// probe sequence without full 64-bit xxhash collisions.
	seed uint64
	// scan rotates capacity eviction scans across shards.
	scan atomic.Uint64
}

// NewTable returns a table of n shards (a power of two, at least 1) whose
// index hash is keyed by seed.
func NewTable(n int, seed uint64) *Table {
	t := &Table{shards: make([]paddedShard, n), shift: 64 - uint(bits.TrailingZeros(uint(n))), seed: seed}
	for i := range t.shards {
		t.shards[i].index.Store(newIndex(0))
		t.shards[i].watermark.Store(math.MinInt64)
	}
	return t
}

// Hash returns the hash of key that the table's methods take.
func Hash(key string) uint64 { return xxhash.Sum64String(key) }

// mix derives the in-shard index hash from a key hash (the murmur3 finalizer
// over the seeded value: every input bit affects every output bit).
func (t *Table) mix(h uint64) uint64 {
	h ^= t.seed
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// Shards returns the number of shards.
func (t *Table) Shards() int { return len(t.shards) }

// ShardOf returns the shard index of hash h: its top bits, so that the
// index hash, derived from all bits, stays independent of the shard.
func (t *Table) ShardOf(h uint64) int {
	if t.shift == 64 {
		return 0
	}
	return int(h >> t.shift)
}

// Lookup returns the live bucket of key; failing that a tombed bucket of
// key, for a key whose bucket was evicted, or is being replaced or moved
// (look again under the mutex: Current); failing that nil. It takes no lock
// and allocates nothing.
func (t *Table) Lookup(h uint64, key string) *Bucket {
	return t.probe(h).Lookup(key)
}

// Probe is where a lookup of one hash starts: its shard's index as loaded,
// and the hash mixed for that index.
type Probe struct {
	ix *index
	m  uint64
}

// Prefetch starts loading the cache line a lookup of h reads first, and
// returns without waiting for it. An engine calls it before it reads the
// clock: the clock's fences wait for loads but not for prefetches, so a
// table larger than the caches pays its memory latency and the clock's at
// once rather than one after the other.
func (t *Table) Prefetch(h uint64) Probe {
	p := t.probe(h)
	prefetch(unsafe.Pointer(&p.ix.lines[p.ix.start(p.m)]))
	return p
}

// probe loads the index of h's shard.
func (t *Table) probe(h uint64) Probe {
	return Probe{t.shards[t.ShardOf(h)].shard.index.Load(), t.mix(h)}
}

// Lookup is Table.Lookup of the hash p was made for, in the index p
// loaded: a rebuild since then has tombed every slot p can find, which
// reads as a bucket found gone.
func (p Probe) Lookup(key string) *Bucket { return p.ix.find(p.m, key) }

// Watermark returns the time (nanoseconds since the engine's epoch) of the
// latest eviction in key's shard, math.MinInt64 if none: a key without a
// bucket is as if updated then.
func (t *Table) Watermark(h uint64) int64 {
	return t.shards[t.ShardOf(h)].watermark.Load()
}

// Generations tells a table which generation new and replacing buckets are
// of, and what a new bucket holds. The engine implements it; a table whose
// one layout never changes uses Fixed.
type Generations interface {
	// Current returns the id of the generation in force.
	Current() uint16
	// Fresh returns the generation in force and the epoch and word of a
	// new bucket in it: the state of a key that had no bucket, from born
	// (nanoseconds since the engine's epoch) or from watermark if that is
	// later.
	Fresh(born, watermark int64) (gen uint16, e fixedpoint.Epoch, w fixedpoint.Word)
}

// Fixed is the Generations of a table whose one layout never changes: every
// bucket is of generation 0, and a new one is full.
type Fixed struct{ Layout *fixedpoint.Layout }

// Current returns 0.
func (f Fixed) Current() uint16 { return 0 }

// Fresh returns generation 0 and a full bucket from born or watermark.
func (f Fixed) Fresh(born, watermark int64) (uint16, fixedpoint.Epoch, fixedpoint.Word) {
	l := f.Layout
	e, w := l.PackNew(l.FullTick(l.At(born).Ceil, l.CeilTick(watermark)), l.Capacity())
	return 0, e, w
}

// Insert returns the bucket of key, creating it if absent: of the current
// generation of gens, holding what gens.Fresh gives for born (nanoseconds
// since the engine's epoch) and the shard's eviction watermark. created
// reports whether this call created it. Insert takes the shard's mutex, and
// reads the generation under it, so that a rewrite of the shard that follows
// a change of generation (engine.SetAt) either comes after the insert and
// rewrites it, or came before and the insert is of the new generation.
func (t *Table) Insert(h uint64, key string, gens Generations, born int64) (b *Bucket, created bool) {
	s := &t.shards[t.ShardOf(h)].shard
	s.mu.Lock()
	defer s.mu.Unlock()
	m := t.mix(h)
	ix := s.index.Load()
	if b := ix.findLive(m, key); b != nil {
		return b, false
	}
	ix = t.room(s, ix)
	gen, e, w := gens.Fresh(born, s.watermark.Load())
	return ix.insert(m, key, gen, e, w), true
}

// room returns the index of s, rebuilt first if one more slot would fill it.
// The caller holds s's mutex.
func (t *Table) room(s *shard, ix *index) *index {
	if ix.full() {
		ix = ix.rebuilt(1, t.mix, nil)
		s.index.Store(ix)
	}
	return ix
}

// Replace replaces old, key's bucket, whose word is w, by a new bucket of
// generation gen and epoch e holding next, for a write whose state lies past
// the span of old's epoch or is packed in another layout: it tombs old
// (Bucket.Tomb, from w), so that takes still holding it find the tomb and
// look the key up again, and publishes the new bucket in another slot. It
// takes the shard's mutex.
//
// It reports false, changing nothing, if old is no longer key's bucket (then
// it returns the bucket that is, nil if none), or old's word is no longer w
// or gen is no longer the current generation of gens (then it returns old):
// the caller recomputes. The generation is checked under the mutex, as in
// Insert.
func (t *Table) Replace(h uint64, key string, old *Bucket, w fixedpoint.Word, gens Generations, gen uint16, e fixedpoint.Epoch, next fixedpoint.Word) (*Bucket, bool) {
	s := &t.shards[t.ShardOf(h)].shard
	s.mu.Lock()
	defer s.mu.Unlock()
	m := t.mix(h)
	ix := s.index.Load()
	if cur := ix.findLive(m, key); cur != old {
		return cur, false
	}
	if gens.Current() != gen || !old.Tomb(w) {
		return old, false
	}
	ix.live--
	ix = t.room(s, ix)
	return ix.insert(m, key, gen, e, next), true
}

// Current returns key's live bucket, or nil, under the shard's mutex: never
// a bucket that an eviction, a replacement or a rebuild has tombed.
func (t *Table) Current(h uint64, key string) *Bucket {
	s := &t.shards[t.ShardOf(h)].shard
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.index.Load().findLive(t.mix(h), key)
}

// Visitor decides the fate of one live bucket during a sweep or an eviction
// scan. If it tombed the bucket (Bucket.TombIf) it returns evicted and the
// time the eviction was decided at, in nanoseconds since the engine's epoch;
// the table then counts the bucket out and raises the shard's watermark to
// that time.
type Visitor func(b *Bucket) (evicted bool, at int64)

// sweepChunk is how many index lines (2 slots each) a sweep visits per hold
// of a shard's mutex, so that an insert into the shard waits for at most one
// chunk, not for the whole shard.
const sweepChunk = 128

// Sweep visits every live bucket of shard i and returns how many were
// evicted. It holds the shard's mutex one chunk at a time (lookups and takes
// never wait; inserts into this shard wait for at most a chunk).
func (t *Table) Sweep(i int, visit Visitor) (evicted int) {
	s := &t.shards[i].shard
	var seen *index
	for l := uint64(0); ; {
		s.mu.Lock()
		ix := s.index.Load()
		if ix != seen {
			// Rebuilt between two chunks: start the shard over, so that no
			// bucket is missed (a bucket visited twice is harmless).
			seen, l = ix, 0
		}
		end := min(l+sweepChunk, uint64(len(ix.lines)))
		for ; l < end; l++ {
			for j := range uint64(2) {
				if t.visitSlot(s, ix, 2*l+j, visit) {
					evicted++
				}
			}
		}
		done := l >= uint64(len(ix.lines))
		s.mu.Unlock()
		if done {
			return evicted
		}
	}
}

// Rewrite moves every live bucket of shard i into a rebuilt index as move
// has it (a change of generation: engine.SetAt), under the shard's mutex.
// Takes on the shard's keys that find their old bucket tombed wait for the
// mutex until the new index is out; lookups of other shards never wait.
func (t *Table) Rewrite(i int, move Mover) {
	s := &t.shards[i].shard
	s.mu.Lock()
	defer s.mu.Unlock()
	s.index.Store(s.index.Load().rebuilt(0, t.mix, move))
}

// EvictOne looks for one bucket the visitor evicts, visiting at most budget
// live buckets, shard after shard from where the last scan stopped. It takes
// one shard's mutex at a time.
func (t *Table) EvictOne(budget int, visit Visitor) bool {
	for range len(t.shards) {
		if budget <= 0 {
			return false
		}
		s := &t.shards[t.scan.Add(1)&uint64(len(t.shards)-1)].shard
		s.mu.Lock()
		ix := s.index.Load()
		n := ix.slots()
		found := false
		for k := uint64(0); k < n && budget > 0; k++ {
			i := (s.cursor + k) % n
			if !ix.slot(i).live() {
				continue
			}
			budget--
			if t.visitSlot(s, ix, i, visit) {
				s.cursor = i + 1
				found = true
				break
			}
		}
		if !found {
			s.cursor += n
		}
		s.mu.Unlock()
		if found {
			return true
		}
	}
	return false
}

// visitSlot shows slot i of ix, if it holds a live bucket, to visit. The
// caller holds s's mutex.
func (t *Table) visitSlot(s *shard, ix *index, i uint64, visit Visitor) bool {
	b := ix.slot(i)
	if !b.live() {
		return false
	}
	evicted, at := visit(b)
	if !evicted {
		return false
	}
	if at > s.watermark.Load() {
		s.watermark.Store(at)
	}
	ix.live--
	return true
}
