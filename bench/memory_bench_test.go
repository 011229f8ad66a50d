package bench

import (
	"flag"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
)

var scalingImpls = flag.String("scaling", "faucet", "comma-separated impls for BenchmarkScaling and BenchmarkTail")

func selected(list string) []impl {
	var out []impl
	for _, im := range impls {
		if slices.Contains(strings.Split(list, ","), im.name) {
			out = append(out, im)
		}
	}
	return out
}

// freshKeys allocates n new 13-byte keys (not the shared cache, so that the
// harness's own copies can be freed before measuring).
func freshKeys(n int) []string {
	k := make([]string, n)
	for i := range k {
		k[i] = fmt.Sprintf("key:%09d", i)
	}
	return k
}

func heapAfterGC() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// bytesPerKey inserts n fresh keys into a new limiter of im and returns the
// heap it holds per key after GC, key bytes included: the harness drops its
// own key slice before measuring, so a key counts only if the limiter keeps
// it (a shared string or a copy).
func bytesPerKey(im impl, n int) float64 {
	before := heapAfterGC()
	l, closeFn := im.new(limitFor(im, "allow"))
	keys := freshKeys(n)
	for _, k := range keys {
		l.allow(k)
	}
	keys = nil
	after := heapAfterGC()
	runtime.KeepAlive(l)
	if closeFn != nil {
		closeFn()
	}
	return float64(int64(after)-int64(before)) / float64(n)
}

// BenchmarkMemory reports the heap each keyed implementation holds per live
// key at 1e6 keys (B/key); ns/op is the time to insert them all.
func BenchmarkMemory(b *testing.B) {
	for _, im := range impls {
		if !im.keyed {
			continue
		}
		b.Run(fmt.Sprintf("impl=%s/keys=1e6", im.name), func(b *testing.B) {
			var per float64
			for b.Loop() {
				per = bytesPerKey(im, manyKeys)
			}
			b.ReportMetric(per, "B/key")
		})
	}
}

// BenchmarkScaling runs scen=many, mode=allow at 1e3 ... 1e7 keys for the
// implementations named by -scaling, and reports B/key at each size.
func BenchmarkScaling(b *testing.B) {
	for _, im := range selected(*scalingImpls) {
		for _, n := range []int{1e3, 1e4, 1e5, 1e6, 1e7} {
			b.Run(fmt.Sprintf("impl=%s/keys=%.0e", im.name, float64(n)), func(b *testing.B) {
				per := bytesPerKey(im, n)
				l, keys := filled(b, im, n)
				calls := callKeys(keys, uniformSeq(n))
				b.ReportAllocs()
				admitted, i := 0, 0
				for b.Loop() {
					if l.allow(calls[i]) {
						admitted++
					}
					i = (i + 1) & (seqLen - 1)
				}
				b.ReportMetric(float64(admitted)/float64(b.N), "admit/op")
				b.ReportMetric(per, "B/key")
			})
		}
	}
}
