package bench

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/internal/fixedpoint"
	"github.com/faucetgo/faucet/internal/shard"
)

var (
	sinkU64  uint64
	sinkBool bool
	// opaqueZero is 0, but a variable: the compiler cannot drop the
	// dependency of one load's address on the value of the load before.
	opaqueZero uint64
)

// BenchmarkCost times, in isolation, each part of a faucet call on one hot
// key, so that the report can add up each scenario's floor: the monotonic clock
// read, the key's hash, the index lookup, the fixed-point step, the
// CompareAndSwap that publishes it, and the striped counter's atomic add.
// Three more parts bound what any limiter can do here: part=now is
// time.Now(), the wall and monotonic read the peers make; part=cas-shared is
// a CompareAndSwap loop on one word from every core (RunParallel), the floor
// of scen=par-hot for any design that keeps one key's state in one place; and
// part=add-shared an atomic add on one word from every core. part=line-many
// and part=line-zipf are the memory floor of scen=many and scen=zipf: one
// load per call from a table of 1e6 keys at 32 bytes each (two keys per
// cache line, as compact as a layout that reads one line per lookup can
// be), in the scenarios' own call order. Each load's address depends on the
// value of the one before (through a zero the compiler cannot see), so no
// two loads overlap: one full memory latency per call where the line is not
// in cache.
func BenchmarkCost(b *testing.B) {
	const key = "key:000000001"
	epoch := time.Now()
	l, err := fixedpoint.NewLayout(1e12, 1e6)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("part=clock", func(b *testing.B) {
		for b.Loop() {
			sinkU64 += uint64(time.Since(epoch))
		}
	})
	b.Run("part=now", func(b *testing.B) {
		for b.Loop() {
			sinkU64 += uint64(time.Now().UnixNano())
		}
	})
	b.Run("part=hash", func(b *testing.B) {
		for b.Loop() {
			sinkU64 += shard.Hash(key)
		}
	})
	b.Run("part=lookup", func(b *testing.B) {
		t := shard.NewTable(256, 1)
		h := shard.Hash(key)
		t.Insert(h, key, shard.Fixed{Layout: l}, 0)
		for b.Loop() {
			sinkBool = t.Lookup(h, key) != nil
		}
	})
	b.Run("part=step", func(b *testing.B) {
		start, _ := l.Pack(0, 0, l.Capacity()/2)
		w := start
		var ns int64
		for b.Loop() {
			ns += 20
			tick := ns >> l.TickShift()
			if s := l.Take(w, 0, fixedpoint.Instant{Tick: tick, Ceil: tick}, 1000); s.Write() {
				w = s.Next
			} else {
				ns, w = 0, start // past the epoch's span (68.7 s of ticks): start over
			}
		}
	})
	b.Run("part=cas", func(b *testing.B) {
		var w atomic.Uint64
		for b.Loop() {
			old := w.Load()
			w.CompareAndSwap(old, old+1)
		}
	})
	b.Run("part=add", func(b *testing.B) {
		var n atomic.Uint64
		for b.Loop() {
			n.Add(1)
		}
	})
	b.Run("part=cas-shared", func(b *testing.B) {
		var w atomic.Uint64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				for {
					old := w.Load()
					if w.CompareAndSwap(old, old+1) {
						break
					}
				}
			}
		})
	})
	for _, p := range []struct {
		name string
		seq  func(int) []int32
	}{{"line-many", uniformSeq}, {"line-zipf", zipfSeq}} {
		b.Run("part="+p.name, func(b *testing.B) {
			const wordsPerKey = 4 // 32 bytes
			seq := p.seq(manyKeys)
			table := make([]uint64, manyKeys*wordsPerKey)
			for i := range table { // fault every page in: untouched pages all read one zero page
				table[i] = 0
			}
			var v uint64
			i := 0
			for b.Loop() {
				v = table[int(seq[i])*wordsPerKey+int(v&opaqueZero)]
				i = (i + 1) & (seqLen - 1)
			}
			sinkU64 += v
		})
	}
	b.Run("part=add-shared", func(b *testing.B) {
		var n atomic.Uint64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n.Add(1)
			}
		})
	})
}
