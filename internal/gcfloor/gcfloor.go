package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"sync"
)

// heapFloor is the heap size below which serve does not collect garbage
// (unless GOGC is set). Go's own floor is 4 MiB: with the 1.5 MiB that
// faucet serve's code keeps live at start (protocol-buffer and metric
// registries, mostly), and the 7 KiB that net/http and the reverse
// proxy allocate per request, the collector ran every 300 requests or
// so and cost some 10 µs of CPU per request, a third of what serve
// added to a plain proxy. At 16 MiB it runs every 2,000 requests.
const heapFloor = 16 << 20

// goHeapMinimum is the runtime's floor at GOGC=100; it scales with GOGC.
const goHeapMinimum = 4 << 20

var heapFloorOnce sync.Once

// Keep makes the collector aim for a heap of at least heapFloor,
// and otherwise, as Go does by default, for twice what is live: after
// every collection it sets the GC percentage for the heap found live. It
// does nothing if GOGC is set: the operator chose.
func Keep() {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	heapFloorOnce.Do(func() {
		sample := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
		last := -1
		adjust := func() {
			rtmetrics.Read(sample)
			if sample[0].Value.Kind() != rtmetrics.KindUint64 {
				return
			}
			if p := gcPercentFor(sample[0].Value.Uint64()); p != last {
				debug.SetGCPercent(p)
				last = p
			}
		}
		adjust()
		onEveryGC(adjust)
	})
}

// gcPercentFor is the GC percentage that sets the next heap goal, with
// live bytes live, to max(heapFloor, 2 × live). The goal is
// live × (1 + percent/100), but at least goHeapMinimum × percent/100:
// at most heapFloor/goHeapMinimum × 100 percent keeps the latter from
// going over heapFloor.
func gcPercentFor(live uint64) int {
	const most = heapFloor / goHeapMinimum * 100
	if live*2 >= heapFloor {
		return 100
	}
	if live*(1+most/100) <= heapFloor {
		return most
	}
	return int(heapFloor*100/live) - 100
}

// onEveryGC calls f, on the runtime's cleanup goroutine, after every
// collection: each call arms the next with an object that only the next
// collection frees.
func onEveryGC(f func()) {
	// A pointer in it keeps it out of the tiny allocator, whose blocks
	// are freed only when all they hold is garbage.
	type sentinel struct{ _ *byte }
	var arm func()
	arm = func() {
		runtime.AddCleanup(&sentinel{}, func(struct{}) {
			f()
			arm()
		}, struct{}{})
	}
	arm()
}
