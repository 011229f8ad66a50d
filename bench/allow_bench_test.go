package bench

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// Modes: with allowLimit the limit never binds; with denyLimit it always
// binds (every key is drained before timing starts).
//
// allowLimit never binds because no benchmark run makes 1e9 calls on one
// limiter, so the burst alone covers every call. Its rate stays low enough
// (1e6/s, a 1000 s window) that go-limiter's fixed windows never roll over
// within a run: that library resets a window's count to a wrong value when
// rate*burst > 1e9 (see docs/performance.md). A blocking pacer cannot bank a burst,
// so blocking implementations get 1e9/s instead, which paces at 1 ns.
var (
	allowLimit    = limit{rate: 1e6, burst: 1e9}
	blockingLimit = limit{rate: 1e9, burst: 1e9}
	denyLimit     = limit{rate: 0.001, burst: 1}
)

// limitFor returns the limit of a mode for an implementation.
func limitFor(im impl, mode string) limit {
	switch {
	case mode == "deny":
		return denyLimit
	case im.blocking:
		return blockingLimit
	}
	return allowLimit
}

const manyKeys = 1_000_000

// BenchmarkAllow runs every implementation through the same scenarios:
//
//	scen=hot           one key, one goroutine
//	scen=many          1e6 keys created beforehand, uniformly random order
//	scen=zipf          the same keys, Zipf-distributed order
//	scen=par-distinct  RunParallel, each goroutine on its own 1024 keys
//	scen=par-hot       RunParallel, all goroutines on one key
//
// and two modes, allow (the limit never binds) and deny (it always binds).
// admit/op reports the fraction admitted, so that nothing looks fast by
// denying. Keys are created with one set of strings and looked up with
// copies laid out in call order (callKeys), as a server looks up bytes it has
// just parsed. Unkeyed libraries run only the one-key scenarios; blocking ones
// only in mode=allow.
func BenchmarkAllow(b *testing.B) {
	for _, im := range impls {
		for _, scen := range []string{"hot", "many", "zipf", "par-distinct", "par-hot"} {
			if !im.keyed && scen != "hot" && scen != "par-hot" {
				continue
			}
			for _, mode := range []string{"allow", "deny"} {
				if im.blocking && mode == "deny" {
					continue
				}
				b.Run(fmt.Sprintf("impl=%s/scen=%s/mode=%s", im.name, scen, mode), func(b *testing.B) {
					runScenario(b, im, scen, mode)
				})
			}
		}
	}
}

func runScenario(b *testing.B, im impl, scen, mode string) {
	l, closeFn := im.new(limitFor(im, mode))
	if closeFn != nil {
		defer closeFn()
	}
	var keys []string
	var seq []int32
	switch scen {
	case "hot", "par-hot":
		keys = []string{"key:000000001"}
	case "many", "zipf":
		keys = keys13(manyKeys)
		if scen == "many" {
			seq = uniformSeq(len(keys))
		} else {
			seq = zipfSeq(len(keys))
		}
	case "par-distinct":
		keys = keys13(1 << 14)
	}
	if want := map[string]int{"hot": 1, "par-hot": 1, "many": manyKeys, "zipf": manyKeys, "par-distinct": 1 << 14}[scen]; len(keys) != want {
		b.Fatalf("scen=%s has %d keys, want %d", scen, len(keys), want)
	}
	// Create every key's bucket, and drain it in mode=deny.
	for _, k := range keys {
		l.allow(k)
	}
	if mode == "deny" {
		for _, k := range keys {
			if l.allow(k) {
				b.Fatalf("key %q still admits after being drained", k)
			}
		}
	}
	// The timed loops pass copies of the keys (see callKeys).
	var calls []string
	if seq != nil {
		calls = callKeys(keys, seq)
	} else {
		calls = callKeys(keys, inOrder(len(keys)))
	}
	b.ReportAllocs()
	var admitted atomic.Int64
	switch scen {
	case "hot":
		k, n := calls[0], int64(0)
		for b.Loop() {
			if l.allow(k) {
				n++
			}
		}
		admitted.Store(n)
	case "many", "zipf":
		n, i := int64(0), 0
		for b.Loop() {
			if l.allow(calls[i]) {
				n++
			}
			i = (i + 1) & (seqLen - 1)
		}
		admitted.Store(n)
	case "par-hot":
		k := calls[0]
		b.RunParallel(func(pb *testing.PB) {
			n := int64(0)
			for pb.Next() {
				if l.allow(k) {
					n++
				}
			}
			admitted.Add(n)
		})
	case "par-distinct":
		admitted.Store(ownKeysParallel(b, l, calls))
	}
	b.ReportMetric(float64(admitted.Load())/float64(b.N), "admit/op")
}

// ownKeysParallel is the timed loop of scen=par-distinct: RunParallel, each
// goroutine cycling through 1024 calls of its own, the g-th goroutine
// through calls[1024g:]. It returns how many calls were admitted.
func ownKeysParallel(b *testing.B, l limiter, calls []string) int64 {
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
	return admitted.Load()
}
