package shard

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/faucetgo/faucet/internal/fixedpoint"
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
	if size := unsafe.Sizeof(Bucket{}); size != 32 {
		t.Fatalf("Bucket is %d bytes, want 32 (two slots to a 64-byte line)", size)
	}
	for _, n := range []int{1, 2, 3, 5, 17, 1000} {
		lines := newLines(n)
		if p := uintptr(unsafe.Pointer(&lines[0])); p%64 != 0 || len(lines) != n {
			t.Errorf("newLines(%d): %d lines at %#x, want %d at a multiple of 64", n, len(lines), p, n)
		}
	}
}

// keyOf returns the key of b, a bucket of tab, decoded from its slot (a key
// of over 16 bytes from the arena of the index b is in now).
func keyOf(tab *Table, b *Bucket) string {
	meta := b.meta.Load()
	if meta&longKey == 0 {
		var buf [inlineMax]byte
		return string(inlineKey(b, meta, &buf))
	}
	for i := range tab.shards {
		ix := tab.shards[i].index.Load()
		lo := uintptr(unsafe.Pointer(&ix.lines[0]))
		if p := uintptr(unsafe.Pointer(b)); p >= lo && p < lo+uintptr(len(ix.lines))*lineBytes {
			return string(arenaKey(ix.arena(), b.key[1]))
		}
	}
	panic("bucket in no index of the table")
}

// Keys of every length go in and come out whole, in place up to 16 bytes and
// in the arena beyond, through inserts and rebuilds.
func TestKeyRoundTrip(t *testing.T) {
	l := layout(t)
	tab := NewTable(1, 5)
	var keys []string
	for n := range 41 {
		keys = append(keys, strings.Repeat("ab", n)[:n], strings.Repeat("\xff\x00", n)[:n])
	}
	keys = append(keys, strings.Repeat("k", 65535), strings.Repeat("q", 300000))
	for i, k := range keys {
		if _, created := tab.Insert(Hash(k), k, Fixed{l}, 0); !created && i%2 == 0 {
			t.Fatalf("len %d: not created", len(k))
		}
	}
	for _, k := range keys {
		b := tab.Lookup(Hash(k), k)
		if b == nil || keyOf(tab, b) != k || b.Gen() != 0 {
			t.Fatalf("len %d: lookup found %v", len(k), b)
		}
		if n := len(k); n > 0 && tab.Lookup(Hash(k[:n-1]+"z"), k[:n-1]+"z") != nil && !slices.Contains(keys, k[:n-1]+"z") {
			t.Fatalf("len %d: found a key never inserted", n)
		}
	}
}

// packKey puts a key's bytes in order, zero beyond, for every length.
func TestPackKey(t *testing.T) {
	for n := range inlineMax + 1 {
		key := "0123456789abcdef"[:n]
		var want [inlineMax]byte
		copy(want[:], key)
		k0, k1 := packKey(key)
		var got [inlineMax]byte
		binary.LittleEndian.PutUint64(got[:8], k0)
		binary.LittleEndian.PutUint64(got[8:], k1)
		if got != want {
			t.Errorf("len %d: packed %q, want %q", n, got, want)
		}
	}
}

// collidingKeys returns n keys whose index hashes agree in their top 16
// bits, so that every index of up to 2^16 lines starts their probes at one
// line or the next. It tries "key-0", "key-1", ... in turn: about 2^16 tries
// per key.
func collidingKeys(tab *Table, n int) []string {
	var keys []string
	var want uint64
	buf := []byte("key-")
	for i := 0; len(keys) < n; i++ {
		buf = strconv.AppendInt(buf[:4], int64(i), 10)
		m := tab.mix(Hash(string(buf))) >> 48
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
	const n = 150
	keys := collidingKeys(tab, n+2)
	absent, fresh := keys[n], keys[n+1]
	keys = keys[:n]
	for _, k := range keys {
		b, created := tab.Insert(Hash(k), k, Fixed{l}, 0)
		if !created || keyOf(tab, b) != k {
			t.Fatalf("insert %q: created=%v key=%q", k, created, keyOf(tab, b))
		}
	}
	// The keys were rebuilt into ever larger indexes, every one of which
	// they collide in.
	if g := len(tab.shards[0].index.Load().lines); g < n/2 {
		t.Fatalf("%d keys in an index of %d lines; want at least %d", n, g, n/2)
	}
	for _, k := range keys {
		b := tab.Lookup(Hash(k), k)
		if b == nil || keyOf(tab, b) != k {
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
		if position[keyOf(tab, b)]%2 == 1 {
			return false, 0
		}
		b.Tomb(b.load())
		return true, 7
	})
	if evicted != n/2 || length(tab) != n/2 {
		t.Fatalf("evicted %d, %d left; want %d, %d", evicted, length(tab), n/2, n/2)
	}
	for i, k := range keys {
		b := tab.Lookup(Hash(k), k)
		if live := b != nil && b.Live(); live != (i%2 == 1) {
			t.Fatalf("after sweep, lookup %q found a live bucket: %v", k, live)
		}
		if cur := tab.Current(Hash(k), k); (cur != nil) != (i%2 == 1) {
			t.Fatalf("after sweep, Current(%q) = %v", k, cur)
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
					if b == nil || keyOf(tab, b) != k {
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

// Takes racing rebuilds: each rebuild moves every live word into a new index,
// and a take that lands on the old copy after the move would be lost (its
// tokens taken twice). The rebuild tombs each word before copying it, so a
// take either lands before (and is copied) or finds the tomb and goes to the
// new index: at one instant, a key yields exactly its burst, however many
// rebuilds run meanwhile, and no taken key is ever created afresh.
func TestTakesRacingRebuilds(t *testing.T) {
	l, _ := fixedpoint.NewLayout(1e8, 10) // burst 1e5
	tab := NewTable(1, 7)
	const keys, cost = 8, 1000 // quanta: a token
	hot := make([]string, keys)
	for i := range hot {
		hot[i] = fmt.Sprintf("hot-%d", i)
		tab.Insert(Hash(hot[i]), hot[i], Fixed{l}, 0)
	}
	now := l.At(0)
	var taken [keys]atomic.Uint64
	var wg sync.WaitGroup
	inserting := make(chan struct{})
	rebuilds := 0
	wg.Go(func() {
		defer close(inserting)
		ix := tab.shards[0].index.Load()
		for i := range 30000 {
			k := fmt.Sprintf("cold-%d", i)
			tab.Insert(Hash(k), k, Fixed{l}, 0)
			if nx := tab.shards[0].index.Load(); nx != ix {
				ix = nx
				rebuilds++
			}
		}
	})
	for g := range 2 {
		wg.Go(func() {
			// Slow takes spread over the whole insert run: each key is
			// drained only after the inserts are done.
			for round := 0; ; round++ {
				select {
				case <-inserting:
				default:
					if round%64 != 63 {
						k := hot[(round+g)%keys]
						if s, _ := take(tab, Hash(k), k, l, now, cost/10); s.Allowed {
							taken[(round+g)%keys].Add(cost / 10)
						}
						continue
					}
				}
				done := true
				for i, k := range hot {
					if s, _ := take(tab, Hash(k), k, l, now, cost); s.Allowed {
						taken[i].Add(cost)
						done = false
					}
				}
				if done {
					return
				}
			}
		})
	}
	wg.Wait()
	if rebuilds < 10 {
		t.Fatalf("only %d rebuilds ran during the takes", rebuilds)
	}
	for i := range hot {
		if got := taken[i].Load(); got > l.Capacity() || l.Capacity()-got >= cost {
			t.Errorf("%s: took %d quanta at one instant from a full bucket of %d", hot[i], got, l.Capacity())
		}
		if _, created := tab.Insert(Hash(hot[i]), hot[i], Fixed{l}, 0); created {
			t.Errorf("%s: its bucket was lost", hot[i])
		}
	}
}

// A slot is never handed to another key while its index lives: a goroutine
// still holding an evicted bucket finds the tomb, never a stranger's word.
func TestEvictedSlotsAreNotReused(t *testing.T) {
	l := layout(t)
	tab := NewTable(1, 11)
	old := map[*Bucket]bool{}
	for i := range 40 {
		k := fmt.Sprint("a", i)
		b, _ := tab.Insert(Hash(k), k, Fixed{l}, 0)
		old[b] = true
	}
	ix := tab.shards[0].index.Load()
	if n := tab.Sweep(0, func(b *Bucket) (bool, int64) { return b.Tomb(b.load()), 0 }); n != 40 {
		t.Fatalf("evicted %d of 40", n)
	}
	for i := 0; tab.shards[0].index.Load() == ix; i++ {
		k := fmt.Sprint("b", i)
		b, _ := tab.Insert(Hash(k), k, Fixed{l}, 0)
		if old[b] {
			t.Fatalf("%s got the slot of an evicted bucket", k)
		}
		if tab.shards[0].index.Load() != ix {
			break
		}
	}
	for b := range old {
		if _, st := b.Take(l, l.At(0), 1); st != Gone {
			t.Fatalf("take on an evicted bucket: status %d", st)
		}
	}
}

// A flood of keys that are created and evicted again leaves tombs in the
// index; rebuilds drop them, so the index stays sized for the live keys,
// however many keys came and went.
func TestChurnKeepsIndexBounded(t *testing.T) {
	l := layout(t)
	tab := NewTable(1, 17)
	for round := range 200 {
		for i := range 500 {
			k := fmt.Sprint(round, "-", i)
			tab.Insert(Hash(k), k, Fixed{l}, 0)
		}
		tab.Sweep(0, func(b *Bucket) (bool, int64) { return b.Tomb(b.load()), 0 })
	}
	ix := tab.shards[0].index.Load()
	if length(tab) != 0 || ix.slots() > 2000 {
		t.Fatalf("after 100,000 keys came and went: %d live, %d slots; want 0 and at most 2000", length(tab), ix.slots())
	}
	if a := ix.arena(); len(a) != 0 {
		t.Fatalf("arena of %d bytes for keys of at most 16 bytes", len(a))
	}
	// Keys of 40 bytes live in the arena, which rebuilds compact too.
	long := strings.Repeat("x", 32)
	for round := range 200 {
		for i := range 500 {
			k := fmt.Sprintf("%s%08d", long, round*500+i)
			tab.Insert(Hash(k), k, Fixed{l}, 0)
		}
		tab.Sweep(0, func(b *Bucket) (bool, int64) { return b.Tomb(b.load()), 0 })
	}
	ix = tab.shards[0].index.Load()
	if a := ix.arena(); ix.slots() > 2000 || ix.longUsed > int(ix.slots())*44 || len(a) > 2*int(ix.slots())*44 {
		t.Fatalf("after 100,000 long keys came and went: %d slots, arena %d of %d bytes", ix.slots(), ix.longUsed, len(a))
	}
}

// A Probe made before a rebuild looks in the index it loaded: it must find
// the key's tombed slot there, never a live word another call can no longer
// see, while the table finds the copy in the new index with the same state.
func TestProbeAcrossRebuild(t *testing.T) {
	l := layout(t)
	tab := NewTable(1, 11)
	const key = "probe-key"
	h := Hash(key)
	b, _ := tab.Insert(h, key, Fixed{l}, 0)
	if _, st := b.Take(l, l.At(0), 3); st != Done {
		t.Fatalf("take: status %d", st)
	}
	probe := tab.Prefetch(h)
	if got := probe.Lookup(key); got != b {
		t.Fatalf("probe before the rebuild found %p, want %p", got, b)
	}
	if got := tab.Prefetch(Hash("other")).Lookup("other"); got != nil {
		t.Fatalf("probe of a missing key found %p", got)
	}
	tab.Rewrite(0, nil)
	old := probe.Lookup(key)
	if old != b {
		t.Fatalf("stale probe found %p, want the old slot %p", old, b)
	}
	if _, st := old.Take(l, l.At(0), 1); st != Gone {
		t.Fatalf("take through a stale probe: status %d, want Gone", st)
	}
	now := tab.Lookup(h, key)
	if now == nil || now == b {
		t.Fatalf("table lookup after the rebuild found %p (old %p)", now, b)
	}
	if got := tab.Prefetch(h).Lookup(key); got != now {
		t.Fatalf("fresh probe found %p, want %p", got, now)
	}
	if _, left, live := peek(now, l, l.At(0)); !live || left != l.Capacity()-3 {
		t.Fatalf("moved bucket holds %d quanta (live %v), want %d", left, live, l.Capacity()-3)
	}
}
