package bench

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// BenchmarkTail times single calls while the table grows from 0 to 1e6 keys:
// every step creates one new key and checks one existing key, each call timed
// on its own into an HDR histogram. The limit keeps every bucket partly
// drained (rate 0.001/s, burst 10), so faucet's sweeper, set to run every
// second, scans the growing table without evicting. The clock reads
// around each call are included (the same for every implementation).
// ns/op is the whole growth; the percentiles are per call.
func BenchmarkTail(b *testing.B) {
	lim := limit{rate: 0.001, burst: 10, sweep: time.Second}
	for _, im := range selected(*scalingImpls) {
		b.Run(fmt.Sprintf("impl=%s/keys=1e6", im.name), func(b *testing.B) {
			keys := keys13(manyKeys)
			h := hdrhistogram.New(1, int64(10*time.Second), 3)
			for b.Loop() {
				h.Reset()
				l, closeFn := im.new(lim)
				rng := rand.New(rand.NewPCG(3, 4))
				for i, k := range keys {
					t0 := time.Now()
					l.allow(k)
					h.RecordValue(int64(time.Since(t0)))
					old := keys[rng.IntN(i+1)]
					t0 = time.Now()
					l.allow(old)
					h.RecordValue(int64(time.Since(t0)))
				}
				if closeFn != nil {
					closeFn()
				}
			}
			b.ReportMetric(float64(h.ValueAtQuantile(50)), "ns-p50")
			b.ReportMetric(float64(h.ValueAtQuantile(99)), "ns-p99")
			b.ReportMetric(float64(h.ValueAtQuantile(99.9)), "ns-p99.9")
			b.ReportMetric(float64(h.Max()), "ns-max")
		})
	}
}
