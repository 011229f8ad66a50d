package gcfloor

import (
	"runtime"
	"testing"
)

func TestGCPercentFor(t *testing.T) {
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 400},
		{1 << 20, 400},
		{heapFloor / 5, 400}, // 5 × live is the floor: the most needed
		{4 << 20, 300},       // 4 × 4 MiB = 16 MiB
		{6 << 20, 166},       // 16/6 = 2.67
		{heapFloor/2 - 1, 100},
		{heapFloor / 2, 100}, // twice live is the floor: Go's default
		{1 << 30, 100},
	} {
		p := gcPercentFor(c.live)
		if p != c.want {
			t.Errorf("gcPercentFor(%d) = %d, want %d", c.live, p, c.want)
		}
		// The goal, and the runtime's minimum at that percentage, are
		// never above the larger of the floor and twice the live heap.
		goal := c.live * uint64(100+p) / 100
		if limit := max(uint64(heapFloor), 2*c.live); goal > limit || uint64(goHeapMinimum)*uint64(p)/100 > limit {
			t.Errorf("gcPercentFor(%d) = %d: goal %d or minimum above %d", c.live, p, goal, limit)
		}
	}
}

func TestOnEveryGC(t *testing.T) {
	calls := make(chan struct{}, 16)
	onEveryGC(func() {
		select {
		case calls <- struct{}{}:
		default:
		}
	})
	// Each collection frees the sentinel armed before it; the cleanup
	// runs afterwards, on its own goroutine, and arms the next one.
	for range 3 {
		runtime.GC()
		<-calls
	}
}
