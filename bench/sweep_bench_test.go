package bench

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

// BenchmarkSweep times one SweepAt over 1e6 buckets: evict=all when every
// bucket has refilled (all are evicted), evict=none when none has (a pure
// scan). ns/op is per sweep of the whole table.
func BenchmarkSweep(b *testing.B) {
	var t0 time.Time
	for _, evict := range []string{"all", "none"} {
		b.Run("impl=faucet/keys=1e6/evict="+evict, func(b *testing.B) {
			keys := keys13(manyKeys)
			e, err := engine.New(engine.Config{Limit: 1, Burst: 2, SweepInterval: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			evicted := 0
			for i := 0; i < b.N; i++ {
				// Each round starts two hours after the last, so that the
				// buckets it creates are not clamped to the previous round's
				// eviction time.
				start := t0.Add(time.Duration(i) * 2 * time.Hour)
				at := start.Add(500 * time.Millisecond) // half a token back: nothing full
				if evict == "all" {
					at = start.Add(time.Hour)
				}
				b.StopTimer()
				for _, k := range keys {
					e.AllowAt(start, k, 1)
				}
				if e.Len() != len(keys) {
					b.Fatalf("Len = %d", e.Len())
				}
				b.StartTimer()
				n := e.SweepAt(at)
				b.StopTimer()
				if want := map[string]int{"all": len(keys), "none": 0}[evict]; n != want {
					b.Fatalf("round %d evicted %d, want %d", i, n, want)
				}
				evicted += n
				b.StartTimer()
			}
			b.ReportMetric(float64(evicted)/float64(b.N), "evicted/op")
		})
	}
}

// BenchmarkSweepInterference measures what a sweeper costs concurrent
// callers: RunParallel takes on keys of their own while another goroutine
// sweeps a table of 1e6 other buckets back to back (sweep=on) or not at all
// (sweep=off).
func BenchmarkSweepInterference(b *testing.B) {
	for _, sweep := range []string{"off", "on"} {
		b.Run("impl=faucet/keys=1e6/sweep="+sweep, func(b *testing.B) {
			e, err := engine.New(engine.Config{Limit: 1e9, Burst: 1e9, SweepInterval: -1})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			idle := keys13(manyKeys)
			now := time.Now()
			for _, k := range idle {
				e.AllowAt(now, k, 1e8) // far from full for 0.1 s
			}
			stop := make(chan struct{})
			done := make(chan struct{})
			var sweeps atomic.Int64
			go func() {
				defer close(done)
				for {
					select {
					case <-stop:
						return
					default:
					}
					if sweep == "on" {
						e.SweepAt(now)
						sweeps.Add(1)
					} else {
						time.Sleep(time.Millisecond)
					}
				}
			}()
			own := keys13(1 << 14)
			var next atomic.Int64
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				g := int(next.Add(1) - 1)
				mine := own[(g*1024)%len(own):][:1024]
				i := 0
				for pb.Next() {
					e.AllowAt(now, mine[i], 1)
					i = (i + 1) & 1023
				}
			})
			b.StopTimer()
			close(stop)
			<-done
			b.ReportMetric(float64(sweeps.Load()), "sweeps")
		})
	}
}
