package adaptive_test

import (
	"fmt"
	"time"

	"github.com/faucetgo/faucet/adaptive"
)

// A controller on a virtual clock, in front of an upstream that answers
// 300 requests a second: below that in 5 ms, above it only 300 of them,
// after a second in its queue. The rate starts at the ceiling, drops to
// 0.7 times what the upstream served, climbs by 20 a step (Ceiling/50)
// until it passes 300 again, and drops again: AIMD's sawtooth.
func Example() {
	c, err := adaptive.New(adaptive.Config{Floor: 50, Ceiling: 1000, LatencyTarget: 50 * time.Millisecond})
	if err != nil {
		panic(err)
	}
	var clock time.Time
	for range 9 {
		rate := c.Rate()
		served, latency := rate, 5*time.Millisecond
		if rate > 300 {
			served, latency = 300, time.Second
		}
		for i := range int(served) {
			c.Observe(clock.Add(time.Duration(i)*time.Second/time.Duration(served)), latency, false)
		}
		clock = clock.Add(time.Second)
		r, _ := c.Step(clock)
		fmt.Printf("%v: %g/s -> %g/s\n", clock.Sub(time.Time{}), rate, r)
	}
	st := c.Stats()
	fmt.Printf("%d decreases, %d increases\n", st.Decreases, st.Increases)
	// Output:
	// 1s: 1000/s -> 210/s
	// 2s: 210/s -> 230/s
	// 3s: 230/s -> 250/s
	// 4s: 250/s -> 270/s
	// 5s: 270/s -> 290/s
	// 6s: 290/s -> 310/s
	// 7s: 310/s -> 210/s
	// 8s: 210/s -> 230/s
	// 9s: 230/s -> 250/s
	// 2 decreases, 7 increases
}

// A bad configuration is an error naming the field and its range.
func ExampleNew_invalid() {
	_, err := adaptive.New(adaptive.Config{Floor: 100, Ceiling: 50, LatencyTarget: 50 * time.Millisecond})
	fmt.Println(err)
	// Output: adaptive: invalid config: Ceiling must be from Floor (100) to 1e9 tokens per second, got 50
}
