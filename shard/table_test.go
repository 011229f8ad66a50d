package shard

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/faucetgo/faucet/fixedpoint"
	"golang.org/x/sys/cpu"
)

func layout(t testing.TB) *fixedpoint.Layout {
	l, err := fixedpoint.NewLayout(5000, 1)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestShardIsPaddedToCacheLines(t *testing.T) {
	line := unsafe.Sizeof(cpu.CacheLinePad{})
	if size := unsafe.Sizeof(paddedShard{}); size%line != 0 || size == 0 {
		t.Fatalf("paddedShard is %d bytes, not a multiple of the %d-byte cache line", size, line)
	}
	// One index group is one 64-byte line on 64-bit platforms (40 bytes with
	// 4-byte pointers).
	if size, want := unsafe.Sizeof(group{}), (8+groupSlots*unsafe.Sizeof(uintptr(0))+7)/8*8; size != want || size > 64 {
		t.Fatalf("index group is %d bytes, want %d and at most 64", size, want)
	}
	if size := unsafe.Sizeof(Bucket{}); size != 8 {
		t.Fatalf("Bucket is %d bytes, want 8 (one word, unpadded)", size)
	}
}

func TestBucketKeyRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 5, 6, 14, 65534, 65535, 65536, 300000} {
		k := strings.Repeat("ab", n)[:n]
		b := newBucket(k, 7, -3, 42)
		if b.key() != k || uint64(b.load()) != 42 || b.Epoch() != -3 || b.Gen() != 7 {
			t.Errorf("len %d: key round trip failed (word %d)", n, b.load())
		}
		if uintptr(unsafe.Pointer(b))%8 != 0 {
			t.Errorf("len %d: bucket at %p is not 8-byte aligned", n, b)
		}
	}
}

// collidingKeys returns n keys that tab's index cannot tell apart by hash:
// their index hashes agree in the tag byte and in the bits that pick the first
// group of an index of up to 1<<groupBits groups, so they match each other's
// tags and share one probe sequence. It tries "key-0", "key-1", ... in turn:
// about 2^(8+groupBits) tries per key.
func collidingKeys(tab *Table, n int, groupBits uint) []string {
	mask := uint64(0xFF)<<56 | (1<<groupBits-1)<<3
	var keys []string
	var want uint64
	buf := []byte("key-")
	for i := 0; len(keys) < n; i++ {
		buf = strconv.AppendInt(buf[:4], int64(i), 10)
		m := tab.mix(Hash(string(buf))) & mask
		if len(keys) == 0 {
			want = m
		}
		if m == want {
			keys = append(keys, string(buf))
		}
	}
	return keys
}

// length returns the number of buckets in tab's indexes.
func length(tab *Table) int {
	n := 0
	for i := range tab.shards {
		s := &tab.shards[i].shard
		s.mu.Lock()
		n += s.index.Load().live
		s.mu.Unlock()
	}
	return n
}

// Keys that collide in the index all share one probe sequence: lookups,
// inserts, removals and rebuilds must still keep them apart.
func TestCollidingHashes(t *testing.T) {
	l := layout(t)
	tab := NewTable(1, 1)
	const n, groupBits = 150, 6
	keys := collidingKeys(tab, n+2, groupBits)
	absent, fresh := keys[n], keys[n+1]
	keys = keys[:n]
	for _, k := range keys {
		b, created := tab.Insert(Hash(k), k, Fixed{l}, 0)
		if !created || b.key() != k {
			t.Fatalf("insert %q: created=%v key=%q", k, created, b.key())
		}
	}
	// The keys were rebuilt into ever larger indexes, every one of which
	// they collide in.
	if g := len(tab.shards[0].index.Load().groups); g > 1<<groupBits || g < 16 {
		t.Fatalf("%d keys in an index of %d groups; want 16 to %d", n, g, 1<<groupBits)
	}
	for _, k := range keys {
		b := tab.Lookup(Hash(k), k)
		if b == nil || b.key() != k {
			t.Fatalf("lookup %q failed", k)
		}
		if again, created := tab.Insert(Hash(k), k, Fixed{l}, 0); created || again != b {
			t.Fatalf("second insert of %q created a new bucket", k)
		}
	}
	if tab.Lookup(Hash(absent), absent) != nil {
		t.Fatal("found an absent key")
	}
	// Evict every other key; the rest stay reachable past the deleted slots.
	position := make(map[string]int)
	for i, k := range keys {
		position[k] = i
	}
	evicted := tab.Sweep(0, func(b *Bucket) (bool, int64) {
		if position[b.key()]%2 == 1 {
			return false, 0
		}
		b.Tomb(b.load())
		return true, 7
	})
	if evicted != n/2 || length(tab) != n/2 {
		t.Fatalf("evicted %d, %d left; want %d, %d", evicted, length(tab), n/2, n/2)
	}
	for i, k := range keys {
		if found := tab.Lookup(Hash(k), k) != nil; found != (i%2 == 1) {
			t.Fatalf("after sweep, lookup %q found=%v", k, found)
		}
	}
	// New buckets in that shard start no earlier than the eviction's tick.
	b, _ := tab.Insert(Hash(fresh), fresh, Fixed{l}, 0)
	if got := l.Resolve(b.load(), b.base(l)); got < 7 {
		t.Errorf("fresh bucket stamped at %d, before the watermark 7", got)
	}
}

// Lookups running during inserts and rebuilds always find every key inserted
// before they started, and never a wrong one.
func TestConcurrentLookupsDuringGrowth(t *testing.T) {
	l := layout(t)
	tab := NewTable(1, 99)
	var inserted atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				n := inserted.Load()
				for i := max(0, n-64); i < n; i++ {
					k := fmt.Sprint(i)
					b := tab.Lookup(Hash(k), k)
					if b == nil || b.key() != k {
						t.Errorf("lookup %q after its insert: %v", k, b)
						return
					}
				}
			}
		})
	}
	for i := range 20000 {
		k := fmt.Sprint(i)
		tab.Insert(Hash(k), k, Fixed{l}, 0)
		inserted.Store(int64(i + 1))
	}
	close(stop)
	wg.Wait()
	if n := length(tab); n != 20000 {
		t.Errorf("%d buckets, want 20000", n)
	}
}

// Two tables (two engines) place the same keys differently within a shard.
func TestIndexIsSeeded(t *testing.T) {
	a, b := NewTable(1, 1), NewTable(1, 2)
	same := 0
	for i := range 1000 {
		h := Hash(fmt.Sprint(i))
		if a.mix(h)&1023 == b.mix(h)&1023 {
			same++
		}
	}
	if same > 10 {
		t.Errorf("%d of 1000 keys share a slot under different seeds", same)
	}
}

func TestEvictOneBudget(t *testing.T) {
	l := layout(t)
	tab := NewTable(2, 3)
	for i := range 100 {
		k := fmt.Sprint(i)
		tab.Insert(Hash(k), k, Fixed{l}, 0)
	}
	visited := 0
	if tab.EvictOne(10, func(*Bucket) (bool, int64) { visited++; return false, 0 }) {
		t.Fatal("evicted without the visitor's consent")
	}
	if visited != 10 {
		t.Errorf("visited %d buckets, budget 10", visited)
	}
	if !tab.EvictOne(1000, func(b *Bucket) (bool, int64) {
		return b.Tomb(b.load()), 0
	}) || length(tab) != 99 {
		t.Errorf("EvictOne with a willing visitor: %d buckets left, want 99", length(tab))
	}
}
