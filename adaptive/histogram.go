package adaptive

import (
	"math"
	"sync/atomic"
	"time"
)

// Latencies are counted in a histogram of fixed buckets on a log scale:
// bucket 0 holds latencies under histMin, bucket i from 1 on those from
// bounds[i-1] up to bounds[i], each bound about 14.9 % (2^(1/5)) above the
// one before, and the last bucket everything from histMax on. A percentile
// read from it is the upper bound of the bucket it falls in: never below
// the exact one, and at most 14.9 % above it (or histMin, for latencies
// under it). Memory is fixed, whatever the traffic: 8 bytes a bucket.
const (
	histMin    = 100 * time.Microsecond
	histMax    = time.Minute
	perDouble  = 5                 // buckets per doubling
	histGrowth = 1.148698354997035 // 2^(1/perDouble)
)

// bounds are the buckets' upper bounds, exclusive, in nanoseconds: bounds[0]
// is histMin and the last is the first at or above histMax.
var bounds = func() []int64 {
	var out []int64
	for i := 0; ; i++ {
		b := int64(math.Round(float64(histMin) * math.Pow(2, float64(i)/perDouble)))
		out = append(out, b)
		if b >= int64(histMax) {
			return out
		}
	}
}()

// histBuckets is the number of buckets: one below each bound, one above
// the last.
var histBuckets = len(bounds) + 1

// bucketOf is the bucket of a latency of ns nanoseconds: the first whose
// upper bound lies above it. A binary search over the bounds, so that the
// bucket of a latency is exactly what the bounds say.
func bucketOf(ns int64) int {
	lo, hi := 0, len(bounds)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if bounds[mid] > ns {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// upper is what a percentile that falls in bucket i reads as: its upper
// bound, or for the last bucket its lower one, histMax or a little above.
func upper(i int) time.Duration {
	return time.Duration(bounds[min(i, len(bounds)-1)])
}

// rank is the nearest-rank position of percentile p among n observations,
// from 1: the smallest k such that k/n >= p.
func rank(p float64, n uint64) uint64 {
	k := uint64(math.Ceil(p*float64(n) - 1e-9))
	return min(max(k, 1), n)
}

// percentileOf reads percentile p from counts, a histogram of n
// observations; 0 for none.
func percentileOf(counts []uint64, n uint64, p float64) time.Duration {
	if n == 0 {
		return 0
	}
	k := rank(p, n)
	var seen uint64
	for i, c := range counts {
		if seen += c; seen >= k {
			return upper(i)
		}
	}
	return upper(len(counts) - 1)
}

// slot is the observations of one step: a histogram of their latencies,
// and how many failed and how many were slower than the target. Observe
// adds to it with atomic adds only.
type slot struct {
	hist   []atomic.Uint64
	failed atomic.Uint64
	slow   atomic.Uint64
	// served counts the responses reported in the slot that did not
	// fail, judged or not: what the upstream served.
	served atomic.Uint64
	// dur is how long the slot was open: the time between the steps that
	// opened and closed it. Only Step, under the controller's mutex, reads
	// and writes it.
	dur time.Duration
}

// clear empties s for reuse. A slot is cleared before it becomes the one
// Observe adds to; an Observe that read the slot as current a whole ring
// of steps ago may still add to it afterwards, which the next step counts
// as an observation of its own: one stale observation, not a lost update.
func (s *slot) clear() {
	for i := range s.hist {
		s.hist[i].Store(0)
	}
	s.failed.Store(0)
	s.slow.Store(0)
	s.served.Store(0)
	s.dur = 0
}
