package bench

import (
	"math/rand/v2"
	"sync/atomic"
	"testing"
)

// BenchmarkKeyOrder is scen=par-distinct for faucet with two ways of handing
// keys to goroutines: order=consecutive gives each goroutine 1024 keys
// created one after the other, as par-distinct does; order=scattered gives
// it 1024 keys drawn at random from all 16,384. A limiter that allocates
// buckets in creation order lays out consecutive keys side by side, so under
// consecutive each core writes memory of its own; real traffic creates keys
// in whatever order requests bring them, which scattered stands for.
func BenchmarkKeyOrder(b *testing.B) {
	var im impl
	for _, i := range impls {
		if i.name == "faucet" {
			im = i
		}
	}
	for _, order := range []string{"consecutive", "scattered"} {
		b.Run("impl=faucet/order="+order, func(b *testing.B) {
			l, closeFn := im.new(limitFor(im, "allow"))
			if closeFn != nil {
				defer closeFn()
			}
			keys := keys13(1 << 14)
			for _, k := range keys {
				l.allow(k)
			}
			perm := inOrder(len(keys))
			if order == "scattered" {
				rng := rand.New(rand.NewPCG(3, 4))
				rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
			}
			calls := callKeys(keys, perm)
			b.ReportAllocs()
			var next, admitted atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				g := int(next.Add(1) - 1)
				own := calls[(g*1024)%len(calls):][:1024]
				n, i := int64(0), 0
				for pb.Next() {
					if l.allow(own[i]) {
						n++
					}
					i = (i + 1) & 1023
				}
				admitted.Add(n)
			})
			b.ReportMetric(float64(admitted.Load())/float64(b.N), "admit/op")
		})
	}
}
