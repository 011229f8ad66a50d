package engine_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/faucetgo/faucet/engine"
)

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// P17: with keys that come and go (every round a new set of 50,000 keys,
// then a sweep once they have refilled) the table holds nothing after each
// sweep and the heap stays at the first round's level: evicted buckets and
// their keys are freed, and indexes are reused, not grown, across rounds.
func TestChurnKeepsMemoryBounded(t *testing.T) {
	const keys, rounds = 50_000, 4
	e := newEngine(t, engine.Config{Limit: 1, Burst: 1, Shards: 64})
	var firstPeak uint64
	now := time.Duration(0)
	for r := range rounds {
		for i := range keys {
			e.AllowAt(at(now), fmt.Sprintf("round-%d-key-%d", r, i), 1)
		}
		if e.Len() != keys {
			t.Fatalf("round %d: Len %d, want %d", r, e.Len(), keys)
		}
		peak := heapInUse()
		if r == 0 {
			firstPeak = peak
		} else if peak > firstPeak+firstPeak/10 {
			t.Errorf("round %d: heap %d bytes with %d keys live, first round %d", r, peak, keys, firstPeak)
		}
		now += 2 * time.Second
		if n := e.SweepAt(at(now)); n != keys || e.Len() != 0 {
			t.Fatalf("round %d: swept %d, Len %d; want %d, 0", r, n, e.Len(), keys)
		}
	}
}
