package bench

import (
	"fmt"
	"testing"
)

// BenchmarkSharing is faucet's scen=par-distinct in tables of three sizes,
// to be run with -cpu 1,2: each goroutine takes from 1024 keys of its own,
// as in par-distinct, among keys live keys. faucet's table holds two
// buckets per 64-byte cache line, placed by hash, so with two goroutines
// the chance that a bucket's line also holds one the other core writes is
// in proportion to the share of the table's keys the other core uses: half
// of them with 2048 keys, a sixteenth with 16384 (the table of
// par-distinct), 1/128 with 131072. Such a line moves between the cores on
// every write to it. How much two goroutines gain over one at each size
// shows what that costs.
func BenchmarkSharing(b *testing.B) {
	im := selected("faucet")[0]
	for _, n := range []int{1 << 11, 1 << 14, 1 << 17} {
		b.Run(fmt.Sprintf("impl=faucet/keys=%d", n), func(b *testing.B) {
			l, keys := filled(b, im, n)
			calls := callKeys(keys, inOrder(n))
			b.ReportAllocs()
			admitted := ownKeysParallel(b, l, calls)
			b.ReportMetric(float64(admitted)/float64(b.N), "admit/op")
		})
	}
}
