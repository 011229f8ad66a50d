package bench

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/fixedpoint"
	"github.com/faucetgo/faucet/shard"
)

var (
	sinkU64  uint64
	sinkBool bool
)

// BenchmarkCost times, in isolation, each part of a faucet call on one hot
// key, so that BENCHMARKS.md can say where the time goes: the monotonic clock
// read, the key's hash, the index lookup, the fixed-point step, the
// CompareAndSwap that publishes it, and the striped counter's atomic add.
// Three more parts bound what any limiter can do here: part=now is
// time.Now(), the wall and monotonic read the peers make; part=cas-shared is
// a CompareAndSwap loop on one word from every core (RunParallel), the floor
// of scen=par-hot for any design that keeps one key's state in one place; and
// part=add-shared an atomic add on one word from every core.
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
	b.Run("part=add-shared", func(b *testing.B) {
		var n atomic.Uint64
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				n.Add(1)
			}
		})
	})
}
