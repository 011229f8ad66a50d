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
	same := 0
	const pairs = 200
	for range pairs {
		var wg sync.WaitGroup
		var stripes [2]uint64
		var started sync.WaitGroup
		started.Add(2)
		release := make(chan struct{})
		for g := range 2 {
			wg.Go(func() {
				stripes[g] = c.stripe()
				started.Done()
				<-release
			})
		}
		// Both must be alive at once, as on two cores: a goroutine that
		// exited first would hand its stack, and so its stripe, to the other.
		started.Wait()
		close(release)
		wg.Wait()
		if stripes[0] == stripes[1] {
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
