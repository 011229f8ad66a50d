package engine

import (
	"sync"
	"testing"
)

// Goroutines that run at the same time must mostly land on different
// stripes: a shift past the 2 KiB minimum stack once put neighbouring
// goroutines on one stripe every time, so that two cores contended on every
// call.
func TestCounterStripesSeparateGoroutines(t *testing.T) {
	c := newCounter()
	const pairs = 200
	// Every goroutine stays alive until all have read their stripe, as on
	// many cores: one that exited would hand its stack, and so its stripe,
	// to a later one. Pairs made one after the other reused the same two
	// stacks each time, so one unlucky collision of two stacks' stripes
	// repeated in all 200 pairs (seen in CI: 200 of 200).
	stripes := make([]uint64, 2*pairs)
	var wg, started sync.WaitGroup
	started.Add(len(stripes))
	release := make(chan struct{})
	for g := range stripes {
		wg.Go(func() {
			stripes[g] = c.stripe()
			started.Done()
			<-release
		})
	}
	started.Wait()
	close(release)
	wg.Wait()
	same := 0
	for i := 0; i < len(stripes); i += 2 {
		if stripes[i] == stripes[i+1] {
			same++
		}
	}
	// With 16 stripes per CPU a pair shares one with probability at most 1/16.
	if same > pairs/4 {
		t.Errorf("%d of %d goroutine pairs shared a stripe (%d stripes)", same, pairs, len(c.stripes))
	}
	c.add()
	c.add()
	if c.load() != 2 {
		t.Errorf("load = %d after two adds", c.load())
	}
}
