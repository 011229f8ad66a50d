package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// keys13 returns n distinct 13-byte keys.
func keys13(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("key:%09d", i)
	}
	return keys
}

// benchEngine returns an engine whose limit never binds (mode=allow) or
// always binds (mode=deny) for the benchmark's call rate.
func benchEngine(b *testing.B, mode string) *engine.Engine {
	cfg := engine.Config{Limit: 1e9, Burst: 1e9, SweepInterval: -1}
	if mode == "deny" {
		cfg = engine.Config{Limit: engine.Every(24 * time.Hour), Burst: 1, SweepInterval: -1}
	}
	e, err := engine.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { e.Close() })
	return e
}

func BenchmarkAllow(b *testing.B) {
	for _, mode := range []string{"allow", "deny"} {
		b.Run("keys=1/mode="+mode, func(b *testing.B) {
			e := benchEngine(b, mode)
			e.Allow("user:12345678")
			b.ReportAllocs()
			admitted := 0
			for b.Loop() {
				if e.Allow("user:12345678") {
					admitted++
				}
			}
			b.ReportMetric(float64(admitted)/float64(b.N), "admit/op")
		})
	}
	for _, n := range []int{1e6} {
		b.Run(fmt.Sprintf("keys=%.0e/mode=allow", float64(n)), func(b *testing.B) {
			e := benchEngine(b, "allow")
			keys := keys13(n)
			for _, k := range keys {
				e.Allow(k)
			}
			if e.Len() != n {
				b.Fatalf("Len = %d, want %d", e.Len(), n)
			}
			order := rand.Perm(n)
			b.ReportAllocs()
			i, admitted := 0, 0
			for b.Loop() {
				if e.Allow(keys[order[i]]) {
					admitted++
				}
				if i++; i == n {
					i = 0
				}
			}
			b.ReportMetric(float64(admitted)/float64(b.N), "admit/op")
		})
	}
	b.Run("keys=1/mode=allow/par=hot", func(b *testing.B) {
		e := benchEngine(b, "allow")
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				e.Allow("user:12345678")
			}
		})
	})
	b.Run("keys=1e4/mode=allow/par=distinct", func(b *testing.B) {
		e := benchEngine(b, "allow")
		keys := keys13(1e4)
		var next atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			own := keys[int(next.Add(1)-1)*1000%len(keys):][:1000]
			i := 0
			for pb.Next() {
				e.Allow(own[i])
				if i++; i == len(own) {
					i = 0
				}
			}
		})
	})
}

// BenchmarkAllowAfterSet compares Allow on engines that have (changed=yes)
// and have not had a change of limit, SetLimit and SetBurst to another
// layout and back, on live buckets: benchstat -col /changed.
func BenchmarkAllowAfterSet(b *testing.B) {
	for _, n := range []int{1, 1e5} {
		for _, changed := range []string{"no", "yes"} {
			b.Run(fmt.Sprintf("keys=%.0e/changed=%s", float64(n), changed), func(b *testing.B) {
				e := benchEngine(b, "allow")
				keys := keys13(n)
				for _, k := range keys {
					e.Allow(k)
				}
				if changed == "yes" {
					for _, err := range []error{e.SetBurst(1e6), e.SetLimit(1e8), e.SetAt(time.Now(), 1e9, 1e9)} {
						if err != nil {
							b.Fatal(err)
						}
					}
				}
				// In random order: buckets made one after another lie side
				// by side in memory, and a change makes them anew in the
				// table's order, so that insertion order would favour the
				// engine that had no change.
				order := rand.Perm(n)
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					e.Allow(keys[order[i]])
					if i++; i == n {
						i = 0
					}
				}
			})
		}
	}
}

// BenchmarkAllowAt measures the engine without the clock read. With
// epoch=every each call lies a whole span of the packed timestamp after the
// last, so that every take replaces its bucket by one of a later epoch: the
// slow path that a bucket takes at most once per half a span of its own
// progress.
func BenchmarkAllowAt(b *testing.B) {
	b.Run("epoch=same", func(b *testing.B) {
		e := benchEngine(b, "allow")
		now := time.Now()
		e.AllowAt(now, "user:12345678", 1)
		b.ReportAllocs()
		for b.Loop() {
			sink = e.AllowAt(now, "user:12345678", 1)
		}
	})
	b.Run("epoch=every", func(b *testing.B) {
		e := benchEngine(b, "allow")
		now := time.Unix(0, 0)
		span := e.Precision().Horizon
		e.AllowAt(now, "user:12345678", 1)
		b.ReportAllocs()
		for b.Loop() {
			now = now.Add(span)
			sink = e.AllowAt(now, "user:12345678", 1)
		}
	})
}

// BenchmarkMemory reports the heap held per live key after GC, key bytes
// included, for 13-byte keys.
func BenchmarkMemory(b *testing.B) {
	for _, n := range []int{1e6} {
		b.Run(fmt.Sprintf("keys=%.0e", float64(n)), func(b *testing.B) {
			keys := keys13(n)
			var perKey float64
			for b.Loop() {
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				e := benchEngine(b, "allow")
				for _, k := range keys {
					e.AllowAt(time.Unix(0, 0), k, 1)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				if e.Len() != n {
					b.Fatalf("Len = %d", e.Len())
				}
				perKey = float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
				runtime.KeepAlive(e)
			}
			b.ReportMetric(perKey, "B/key")
		})
	}
}

// BenchmarkTake compares AllowN with Take through the Limiter interface, the
// contract every store shares, on one live key: benchstat -col /api.
func BenchmarkTake(b *testing.B) {
	for _, mode := range []string{"allow", "deny"} {
		b.Run("api=AllowN/mode="+mode, func(b *testing.B) {
			e := benchEngine(b, mode)
			e.Allow("user:12345678")
			b.ReportAllocs()
			for b.Loop() {
				sink = e.AllowN("user:12345678", 1)
			}
		})
		b.Run("api=Limiter/mode="+mode, func(b *testing.B) {
			e := benchEngine(b, mode)
			e.Allow("user:12345678")
			var l engine.Limiter = e
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				sink, _ = l.Take(ctx, "user:12345678", 1)
			}
		})
	}
}

// BenchmarkMulti compares Take on a Multi of 1 to 3 engines with Take on
// one Engine, through the Limiter interface on one live key whose limits
// never bind: benchstat -col /limiter (at parts=1), or -col /parts.
func BenchmarkMulti(b *testing.B) {
	ctx := context.Background()
	run := func(b *testing.B, l engine.Limiter) {
		if d, err := l.Take(ctx, "user:12345678", 1); err != nil || !d.Allowed {
			b.Fatalf("first take = %+v, %v", d, err)
		}
		b.ReportAllocs()
		for b.Loop() {
			sink, _ = l.Take(ctx, "user:12345678", 1)
		}
		if !sink.Allowed {
			b.Fatalf("last take denied: %+v", sink)
		}
	}
	b.Run("limiter=Engine/parts=1", func(b *testing.B) {
		run(b, benchEngine(b, "allow"))
	})
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("limiter=Multi/parts=%d", n), func(b *testing.B) {
			parts := make([]*engine.Engine, n)
			for i := range parts {
				parts[i] = benchEngine(b, "allow")
			}
			m, err := engine.AllEngines(parts...)
			if err != nil {
				b.Fatal(err)
			}
			run(b, m)
		})
	}
}
