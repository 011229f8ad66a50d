package shard

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/faucetgo/faucet/internal/fixedpoint"
)

func BenchmarkLookup(b *testing.B) {
	l, _ := fixedpoint.NewLayout(1000, 1)
	for _, n := range []int{1, 1e6} {
		b.Run(fmt.Sprintf("keys=%.0e", float64(n)), func(b *testing.B) {
			tab := NewTable(32, 1)
			keys := make([]string, n)
			for i := range keys {
				keys[i] = fmt.Sprintf("key:%09d", i)
			}
			for i := range keys {
				tab.Insert(Hash(keys[i]), keys[i], Fixed{l}, 0)
			}
			order := rand.Perm(n)
			i := 0
			for b.Loop() {
				k := keys[order[i]]
				if tab.Lookup(Hash(k), k) == nil {
					b.Fatal("missing")
				}
				if i++; i == n {
					i = 0
				}
			}
		})
	}
}

// BenchmarkRebuild times the rebuild of one shard's index (Rewrite, which
// moves every bucket as growth does): how long takes on that shard's keys
// wait. 4e3 keys is a shard of a 1e6-key engine of 256 shards.
func BenchmarkRebuild(b *testing.B) {
	l, _ := fixedpoint.NewLayout(1000, 1)
	for _, n := range []int{4e3, 4e4} {
		b.Run(fmt.Sprintf("keys=%.0e", float64(n)), func(b *testing.B) {
			tab := NewTable(1, 1)
			for i := range n {
				k := fmt.Sprintf("key:%09d", i)
				tab.Insert(Hash(k), k, Fixed{l}, 0)
			}
			for b.Loop() {
				tab.Rewrite(0, nil)
			}
		})
	}
}
