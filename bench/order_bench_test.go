package bench

import (
	"math/rand/v2"
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
	im := selected("faucet")[0]
	for _, order := range []string{"consecutive", "scattered"} {
		b.Run("impl=faucet/order="+order, func(b *testing.B) {
			l, keys := filled(b, im, 1<<14)
			perm := inOrder(len(keys))
			if order == "scattered" {
				rng := rand.New(rand.NewPCG(3, 4))
				rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
			}
			calls := callKeys(keys, perm)
			b.ReportAllocs()
			admitted := ownKeysParallel(b, l, calls)
			b.ReportMetric(float64(admitted)/float64(b.N), "admit/op")
		})
	}
}
