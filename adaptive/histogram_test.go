package adaptive

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"
)

// The bounds grow by 2^(1/5) from 100 µs to the first at or above a
// minute, and each latency lies in the bucket the bounds say.
func TestBounds(t *testing.T) {
	if bounds[0] != int64(histMin) || bounds[len(bounds)-1] < int64(histMax) || bounds[len(bounds)-2] >= int64(histMax) {
		t.Errorf("bounds from %d to %d ns", bounds[0], bounds[len(bounds)-1])
	}
	for i := 1; i < len(bounds); i++ {
		if g := float64(bounds[i]) / float64(bounds[i-1]); g < 1.148 || g > 1.1495 {
			t.Errorf("bound %d is %g times the one before, want 1.1487", i, g)
		}
	}
	for _, ns := range []int64{0, 1, int64(histMin) - 1, int64(histMin), 5e6, int64(histMax), 1 << 62} {
		i := bucketOf(ns)
		if i > 0 && ns < bounds[i-1] || i < len(bounds) && ns >= bounds[i] {
			t.Errorf("latency %d ns in bucket %d", ns, i)
		}
	}
}

// checkPercentile compares the histogram's percentile of latencies with
// the exact nearest-rank one: never below, and within a bucket above.
func checkPercentile(t *testing.T, latencies []time.Duration, p float64) {
	t.Helper()
	if len(latencies) == 0 {
		return
	}
	counts := make([]uint64, histBuckets)
	for _, l := range latencies {
		counts[bucketOf(int64(l))]++
	}
	n := uint64(len(latencies))
	got := percentileOf(counts, n, p)
	sorted := slices.Clone(latencies)
	slices.Sort(sorted)
	exact := sorted[rank(p, n)-1]
	switch {
	case exact >= histMax:
		if got < histMax {
			t.Errorf("p%g of %d latencies: %v, exact %v; want at least %v", p*100, n, got, exact, histMax)
		}
	case got < exact || float64(got) > max(float64(histMin), float64(exact)*histGrowth+1):
		t.Errorf("p%g of %d latencies: %v, exact %v; want from exact to 14.9 %% above it (or %v)", p*100, n, got, exact, histMin)
	}
}

// FuzzPercentile reads latencies and a percentile from the input. The
// seed corpus, run in every test, is a thousand sets of them.
func FuzzPercentile(f *testing.F) {
	seed := uint64(1)
	next := func() uint64 { // xorshift: the same corpus every run
		seed ^= seed << 13
		seed ^= seed >> 7
		seed ^= seed << 17
		return seed
	}
	for range 1000 {
		n := 1 + next()%300
		b := make([]byte, 2+8*n)
		binary.LittleEndian.PutUint16(b, uint16(next()))
		scale := 1 + next()%40 // latencies spread over up to 2^40 ns
		for i := range n {
			binary.LittleEndian.PutUint64(b[2+8*i:], next()%(1<<scale))
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < 2 {
			return
		}
		p := (float64(binary.LittleEndian.Uint16(b)) + 1) / 65538 // in (0, 1)
		var latencies []time.Duration
		for b = b[2:]; len(b) >= 8; b = b[8:] {
			latencies = append(latencies, time.Duration(binary.LittleEndian.Uint64(b)>>1)) // >= 0
		}
		checkPercentile(t, latencies, p)
	})
}

// The rank is the nearest rank, and 1 to n whatever p.
func TestRank(t *testing.T) {
	for _, tt := range []struct {
		p    float64
		n, k uint64
	}{{0.99, 100, 99}, {0.99, 101, 100}, {0.99, 1, 1}, {0.5, 4, 2}, {0.5, 5, 3}, {1e-9, 10, 1}, {0.999999, 10, 10}} {
		if k := rank(tt.p, tt.n); k != tt.k {
			t.Errorf("rank(%g, %d) = %d, want %d", tt.p, tt.n, k, tt.k)
		}
	}
}
