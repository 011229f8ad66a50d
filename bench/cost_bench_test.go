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
	b.Run("part=hash", func(b *testing.B) {
		for b.Loop() {
			sinkU64 += shard.Hash(key)
		}
	})
	b.Run("part=lookup", func(b *testing.B) {
		t := shard.NewTable(256, 1)
		h := shard.Hash(key)
		t.Insert(h, key, l, fixedpoint.Instant{})
		for b.Loop() {
			sinkBool = t.Lookup(h, key) != nil
		}
	})
	b.Run("part=step", func(b *testing.B) {
		w := l.Pack(0, l.Capacity/2)
		var ns int64
		for b.Loop() {
			ns += 20
			tick := ns >> l.TickShift
			s := l.Take(w, 0, fixedpoint.Instant{Tick: tick, Ceil: tick}, 1000)
			w = s.Next
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
}
